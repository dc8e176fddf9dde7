// Helpers for GPU kernel tests: device 0's caching pool, host <-> device copies of vectors.
// Test-only. Thread-safety: as the pool and copies they wrap.
#pragma once

#include <span>
#include <vector>

#include "kernels/memory.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::testing {

// The caching pool of CUDA device 0 (aborts when there is none: GPU tests skip before).
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
