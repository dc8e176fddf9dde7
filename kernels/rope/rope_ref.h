// Plain RoPE math on arrays of T (float for the CPU op, double for float64 checks).
// Shapes and formulas as in kernels/rope.h. Thread-safety: pure function.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::kernels::ref {

// x, out: [tokens, heads, head_dim]; pos: [tokens]; inv_freq: [rotary_dim / 2].
// sign = +1 for forward, -1 for backward (rotation by -angle). out may alias x.
template <typename T>
void RopeApply(T* out, const T* x, const int32_t* pos, const T* inv_freq, int64_t tokens,
               int64_t heads, int64_t head_dim, int64_t rotary_dim, T sign) {
  const int64_t half = rotary_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const T* xr = x + (t * heads + h) * head_dim;
      T* o = out + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const T a = static_cast<T>(pos[t]) * inv_freq[i];
        const T c = std::cos(a), s = sign * std::sin(a);
        const T x1 = xr[i], x2 = xr[i + half];
        o[i] = x1 * c - x2 * s;
        o[i + half] = x2 * c + x1 * s;
      }
      for (int64_t i = rotary_dim; i < head_dim; ++i) o[i] = xr[i];
    }
  }
}

}  // namespace tandem::kernels::ref
