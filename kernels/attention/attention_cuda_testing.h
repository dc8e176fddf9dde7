// Helpers shared by the attention GPU tests (attention_cuda_test, dflash_mma_cuda_test):
// NaN-poisoned device buffers, host views, and a closeness check that names the worst element
// as (row, head, dim). Test-only: uses gtest and the CUDA runtime; include only from tests
// built with TANDEM_HAVE_CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kernels/attention/attention_testing.h"
#include "kernels/tensor.h"

namespace tandem::kernels::attention_testing {

// A device copy of `host` (or n NaN elements), freed on destruction.
template <typename T>
class DevBuf {
 public:
  explicit DevBuf(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n_, 1) * sizeof(T)),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DevBuf(size_t n) : DevBuf(NanFilled(n)) {}
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p_); }
  std::vector<T> ToHost() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  TensorView View(DType t, Shape s) const { return TensorView(p_, t, s, Device::Cuda(0)); }

 private:
  static std::vector<T> NanFilled(size_t n) {
    std::vector<T> h(n);
    std::memset(static_cast<void*>(h.data()), 0xff, n * sizeof(T));  // NaN (bf16, f32)
    return h;
  }
  T* p_ = nullptr;
  size_t n_;
};

inline TensorView Host(std::vector<bf16>& v, Shape s) {
  return TensorView(v.data(), DType::kBF16, s);
}
inline TensorView Host(std::vector<float>& v, Shape s) {
  return TensorView(v.data(), DType::kF32, s);
}
inline TensorView Host(std::vector<int32_t>& v, Shape s) {
  return TensorView(v.data(), DType::kI32, s);
}

// "what: max |err| ... at (row r, head h, dim c)" for a [rows, heads, inner] tensor.
template <typename A, typename B>
void ExpectClose(const char* what, const std::vector<A>& got, const std::vector<B>& want,
                 int64_t heads, int64_t inner, double atol, double rtol) {
  const CloseReport r = Compare(got, want, atol, rtol);
  const int64_t i = std::max<int64_t>(r.worst, 0);
  EXPECT_TRUE(r.ok) << r.ToString(what)
                    << fmt::format(" = (row {}, head {}, dim {})", i / (heads * inner),
                                   (i / inner) % heads, i % inner);
}

}  // namespace tandem::kernels::attention_testing
