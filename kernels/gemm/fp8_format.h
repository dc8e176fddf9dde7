// The OCP 8-bit float formats on the host: e4m3fn (4 exponent bits, bias 7, 3 mantissa bits,
// finite max 448, no infinities, NaN = S.1111.111) and e5m2 (IEEE-like: bias 15, max 57344,
// infinities). Encoding rounds to nearest even and saturates to the largest finite value
// (CUDA's __NV_SATFINITE), so CPU references produce the same bytes as the CUDA kernels.
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::kernels {

inline constexpr float kE4m3Max = 448.f;

inline float E4m3ToFloat(uint8_t b) {
  const float sign = (b & 0x80) ? -1.f : 1.f;
  const int e = (b >> 3) & 0xF, m = b & 0x7;
  if (e == 0xF && m == 0x7) return std::nanf("");
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(1.f + static_cast<float>(m) / 8.f, e - 7);
}

inline float E5m2ToFloat(uint8_t b) {
  const float sign = (b & 0x80) ? -1.f : 1.f;
  const int e = (b >> 2) & 0x1F, m = b & 0x3;
  if (e == 0x1F) return m == 0 ? sign * INFINITY : std::nanf("");
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -16);
  return sign * std::ldexp(1.f + static_cast<float>(m) / 4.f, e - 15);
}

// Round to nearest even, saturating: |f| >= 448 (and +-inf) -> +-448; NaN -> NaN (0x7F).
inline uint8_t FloatToE4m3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= kE4m3Max) return sign | 0x7E;
  if (a < 0x1p-6f) {  // subnormal: multiples of 2^-9 (a rounding up to 2^-6 gives code 8)
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  }
  int e = 0;
  const float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  int exp = e - 1;                       // a = (2 * frac) * 2^exp, 2*frac in [1, 2)
  int m = static_cast<int>(std::nearbyint((2.f * frac - 1.f) * 8.f));
  if (m == 8) m = 0, ++exp;
  return sign | static_cast<uint8_t>(((exp + 7) << 3) | m);  // exp <= 8, m <= 6 once exp == 8
}

}  // namespace tandem::kernels
