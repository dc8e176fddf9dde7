// Plain RMSNorm math on arrays of T (float for the CPU op, double for float64 checks in
// tests). Shapes and formulas as in kernels/rmsnorm.h. Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::kernels::ref {

// x: [rows, h], w: [h] -> y: [rows, h], rstd: [rows] (rstd may be null)
template <typename T>
void RmsNormForward(T* y, T* rstd, const T* x, const T* w, int64_t rows, int64_t h, T eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * h;
    T ss = 0;
    for (int64_t i = 0; i < h; ++i) ss += xr[i] * xr[i];
    T rs = T(1) / std::sqrt(ss / T(h) + eps);
    for (int64_t i = 0; i < h; ++i) y[r * h + i] = xr[i] * rs * w[i];
    if (rstd != nullptr) rstd[r] = rs;
  }
}

// dy, x: [rows, h], w: [h], rstd: [rows] -> dx: [rows, h]; dw: [h] accumulated.
template <typename T>
void RmsNormBackward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd, int64_t rows,
                     int64_t h) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * h;
    const T* dyr = dy + r * h;
    const T rs = rstd[r];
    T dot = 0;
    for (int64_t i = 0; i < h; ++i) dot += dyr[i] * w[i] * xr[i];
    const T c = rs * rs * dot / T(h);
    for (int64_t i = 0; i < h; ++i) {
      dx[r * h + i] = rs * (dyr[i] * w[i] - xr[i] * c);
      dw[i] += dyr[i] * xr[i] * rs;
    }
  }
}

}  // namespace tandem::kernels::ref
