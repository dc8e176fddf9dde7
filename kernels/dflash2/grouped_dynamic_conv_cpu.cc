#include "kernels/dflash2/grouped_dynamic_conv.h"

namespace tandem::kernels::dflash2 {

template <typename T>
void GroupedDynamicConvForward(const ConvShape& s, const T* x, const T* base, const T* d,
                               int64_t ld_d, const int32_t* pos, T* y) {
  const int64_t H = s.hidden, G = s.groups();
  for (int64_t t = 0; t < s.rows; ++t) {
    T* yt = y + t * H;
    for (int64_t c = 0; c < H; ++c) yt[c] = T(0);
    for (int64_t k = 0; k < s.taps && k <= pos[t]; ++k) {
      const T* xs = x + (t - k) * H;
      const T* bk = base + k * H;
      const T* dk = d + t * ld_d + k * G;
      for (int64_t c = 0; c < H; ++c) yt[c] += (bk[c] + dk[c / s.group]) * xs[c];
    }
  }
}

template <typename T>
void GroupedDynamicConvBackward(const ConvShape& s, const T* x, const T* base, const T* d,
                                int64_t ld_d, const int32_t* pos, const T* dy, T* dx, T* dbase,
                                T* dd) {
  const int64_t H = s.hidden, G = s.groups();
  for (int64_t t = 0; t < s.rows; ++t) {
    const T* dyt = dy + t * H;
    for (int64_t k = 0; k < s.taps && k <= pos[t]; ++k) {
      const T* xs = x + (t - k) * H;
      T* dxs = dx + (t - k) * H;
      const T* bk = base + k * H;
      T* dbk = dbase + k * H;
      const T* dk = d + t * ld_d + k * G;
      T* ddk = dd + t * ld_d + k * G;
      for (int64_t c = 0; c < H; ++c) {
        const int64_t g = c / s.group;
        dxs[c] += dyt[c] * (bk[c] + dk[g]);
        dbk[c] += dyt[c] * xs[c];
        ddk[g] += dyt[c] * xs[c];
      }
    }
  }
}

template <typename T>
void DynamicKernelForward(const ConvShape& s, const T* u, const T* w, T* d) {
  const int64_t H = s.hidden, n = 2 * s.taps * s.groups();
  for (int64_t t = 0; t < s.rows; ++t)
    for (int64_t o = 0; o < n; ++o) {
      T acc = 0;
      for (int64_t c = 0; c < H; ++c) acc += u[t * H + c] * w[o * H + c];
      d[t * n + o] = acc;
    }
}

template <typename T>
void DynamicKernelBackward(const ConvShape& s, const T* u, const T* w, const T* dd, T* du,
                           T* dw) {
  const int64_t H = s.hidden, n = 2 * s.taps * s.groups();
  for (int64_t t = 0; t < s.rows; ++t)
    for (int64_t o = 0; o < n; ++o) {
      const T g = dd[t * n + o];
      for (int64_t c = 0; c < H; ++c) {
        du[t * H + c] += g * w[o * H + c];
        dw[o * H + c] += g * u[t * H + c];
      }
    }
}

#define TANDEM_DFLASH2_CONV(T)                                                                  \
  template void GroupedDynamicConvForward<T>(const ConvShape&, const T*, const T*, const T*,   \
                                             int64_t, const int32_t*, T*);                      \
  template void GroupedDynamicConvBackward<T>(const ConvShape&, const T*, const T*, const T*,  \
                                              int64_t, const int32_t*, const T*, T*, T*, T*);   \
  template void DynamicKernelForward<T>(const ConvShape&, const T*, const T*, T*);             \
  template void DynamicKernelBackward<T>(const ConvShape&, const T*, const T*, const T*, T*, T*);
TANDEM_DFLASH2_CONV(float)
TANDEM_DFLASH2_CONV(double)
#undef TANDEM_DFLASH2_CONV

}  // namespace tandem::kernels::dflash2
