// Test helper for FP8 producers: compares a device-made block-scaled activation with the
// CPU reference's by dequantized value. Test-only. Thread-safety: pure function.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gemm/fp8_format.h"

namespace tandem::kernels::testing {

// q: [mp, k] codes, s: scales at [g * mp + r]. Each dequantized value may differ by one
// e4m3 step (2^-3 relative, or 2^-9 of the group scale near zero) plus the scales' own
// relative gap `srtol` (the device reduces in another order). Returns "" when all agree.
inline std::string CompareFp8Activations(const std::vector<uint8_t>& got_q,
                                         const std::vector<float>& got_s,
                                         const std::vector<uint8_t>& want_q,
                                         const std::vector<float>& want_s, int64_t mp,
                                         int64_t k, double srtol) {
  for (int64_t r = 0; r < mp; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const int64_t si = (c / 128) * mp + r;
      const double g = E4m3ToFloat(got_q[r * k + c]) * double(got_s[si]);
      const double w = E4m3ToFloat(want_q[r * k + c]) * double(want_s[si]);
      const double tol = std::fabs(w) * (0.13 + 2 * srtol) + std::ldexp(want_s[si], -9) * 1.01;
      if (!(std::fabs(g - w) <= tol) || std::fabs(got_s[si] - want_s[si]) > srtol * want_s[si])
        return "row " + std::to_string(r) + " col " + std::to_string(c) + ": got " +
               std::to_string(g) + " (scale " + std::to_string(got_s[si]) + "), want " +
               std::to_string(w) + " (scale " + std::to_string(want_s[si]) + ")";
    }
  return "";
}

}  // namespace tandem::kernels::testing
