#include "kernels/dflash2/logit_softcap.h"

#include <cmath>

namespace tandem::kernels::dflash2 {

template <typename T>
void LogitSoftcapForward(int64_t n, T multiplier, T cap, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i] * multiplier;
    y[i] = cap > T(0) ? cap * std::tanh(v / cap) : v;
  }
}

template <typename T>
void LogitSoftcapBackward(int64_t n, T multiplier, T cap, const T* x, const T* dy, T* dx) {
  for (int64_t i = 0; i < n; ++i) {
    T g = multiplier;
    if (cap > T(0)) {
      const T th = std::tanh(x[i] * multiplier / cap);
      g *= T(1) - th * th;
    }
    dx[i] = dy[i] * g;
  }
}

template void LogitSoftcapForward<float>(int64_t, float, float, const float*, float*);
template void LogitSoftcapForward<double>(int64_t, double, double, const double*, double*);
template void LogitSoftcapBackward<float>(int64_t, float, float, const float*, const float*,
                                          float*);
template void LogitSoftcapBackward<double>(int64_t, double, double, const double*,
                                           const double*, double*);

}  // namespace tandem::kernels::dflash2
