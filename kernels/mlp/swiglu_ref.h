// Plain SwiGLU math on contiguous arrays of T (float for the CPU op, double for float64
// checks). Formulas as in kernels/swiglu.h. Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::kernels::ref {

template <typename T>
T Sigmoid(T g) {
  return T(1) / (T(1) + std::exp(-g));
}

// gate, up, out: [n]
template <typename T>
void SwiGluForward(T* out, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] * Sigmoid(gate[i]) * up[i];
}

// dout, gate, up: [n] -> dgate, dup: [n]
template <typename T>
void SwiGluBackward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i], sg = Sigmoid(g);
    dgate[i] = dout[i] * up[i] * sg * (T(1) + g * (T(1) - sg));
    dup[i] = dout[i] * g * sg;
  }
}

}  // namespace tandem::kernels::ref
