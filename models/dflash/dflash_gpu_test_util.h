// What the drafter's GPU tests share: a host array uploaded to a device tensor, a device
// tensor read back to the host (synchronously), and the relative L2 distance of two float
// arrays. Thread-safety: for one test thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
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

// `host` as a bf16 tensor of `shape` from `alloc` (synchronously); the tensor is appended to
// `owned`, which keeps it alive for the returned view.
inline kernels::TensorView Upload(kernels::Allocator& alloc,
                                  const std::vector<kernels::bf16>& host, kernels::Shape shape,
                                  std::vector<kernels::Tensor>* owned) {
  auto made = kernels::Tensor::Empty(alloc, kernels::DType::kBF16, shape, nullptr);
  EXPECT_TRUE(made.ok());
  kernels::Tensor x = std::move(*made);
  EXPECT_TRUE(kernels::CopyFromHost(x, host.data(), nullptr).ok());
  kernels::TensorView view = x;
  owned->push_back(std::move(x));
  return view;
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
