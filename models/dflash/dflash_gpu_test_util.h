// What the drafter's GPU tests share: a device tensor read back to the host (synchronously)
// and the relative L2 distance of two float arrays.
// Thread-safety: test helpers, one thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"

namespace tandem::models::testing {

// `v`'s elements as T, copied to the host and synchronized (a failure is a test failure).
template <typename T>
std::vector<T> Host(const kernels::TensorView& v) {
  std::vector<T> out(v.numel());
  EXPECT_TRUE(kernels::CopyToHost(out.data(), v, nullptr).ok());
  EXPECT_TRUE(kernels::SynchronizeStream(v.device(), nullptr).ok());
  return out;
}

// ||a - b|| / ||b|| over n elements (b near 0: divided by 1e-15 instead).
inline double RelL2(const float* a, const float* b, int64_t n) {
  double e = 0, r = 0;
  for (int64_t i = 0; i < n; ++i) {
    e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return std::sqrt(e / std::max(r, 1e-30));
}

}  // namespace tandem::models::testing
