// Helpers for GPU kernel tests: device 0's caching pool, host <-> device copies of vectors.
// Test-only. Thread-safety: as the pool and copies they wrap.
#pragma once

#include <span>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::testing {

// Relative tolerance of one bf16 ulp (2^-7 relative to the value) plus a hair: for a CUDA
// result that matches the CPU reference in fp32 up to rounding and so may round to the
// neighbouring bf16 value. Each test says why its kernel differs only that much.
inline constexpr double kOneBf16UlpRtol = 1.0 / 128 + 1e-4;

// The caching pool of CUDA device 0 that this test binary owns (aborts when there is no
// device: GPU tests skip before).
CachingPool& Pool();

// A device tensor holding `host` (synchronous).
template <typename T>
Tensor ToDevice(std::span<const T> host, DType dtype, Shape shape) {
  return MakeTensor<T>(Pool(), dtype, shape, host);
}
template <typename T>
Tensor ToDevice(const std::vector<T>& host, DType dtype, Shape shape) {
  return ToDevice<T>(std::span<const T>(host), dtype, shape);
}

}  // namespace tandem::kernels::testing
