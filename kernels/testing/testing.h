// Shared helpers for kernel tests: seeded random inputs, element-wise comparison with
// |got - want| <= atol + rtol * |want| and a report naming the worst element, and central
// finite differences in float64 for checking backward passes.
// Test-only (links GoogleTest). Thread-safety: free functions on caller-owned data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/core/memory.h"

namespace tandem::kernels::testing {

// n uniform values in [lo, hi) from a seeded generator (deterministic across runs).
std::vector<float> RandomFloats(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);
// The same values stored as bf16.
std::vector<bf16> RandomBf16(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);
std::vector<float> ToFloat(std::span<const bf16> v);
std::vector<double> ToDouble(std::span<const bf16> v);
std::vector<double> ToDouble(std::span<const float> v);
std::vector<bf16> ToBf16(std::span<const float> v);

// Passes when every |got[i] - want[i]| <= atol + rtol * |want[i]| (NaN never passes);
// otherwise the message gives the number of failures and the worst element (index, got,
// want, error, bound). `what` names the tensor in the message.
::testing::AssertionResult AllClose(std::span<const double> got, std::span<const double> want,
                                    double atol, double rtol, const std::string& what = "");
::testing::AssertionResult AllClose(std::span<const float> got, std::span<const float> want,
                                    double atol, double rtol, const std::string& what = "");
::testing::AssertionResult AllClose(std::span<const bf16> got, std::span<const bf16> want,
                                    double atol, double rtol, const std::string& what = "");
// Bitwise equality, reporting the first differing element.
::testing::AssertionResult BitEqual(std::span<const bf16> got, std::span<const bf16> want);

// d f / d x_i by central differences (f(x + h e_i) - f(x - h e_i)) / 2h, in float64.
// With smooth f and h ~ 1e-6 the error is ~1e-9 relative, far below what any test checks.
std::vector<double> NumericalGradient(const std::function<double(const std::vector<double>&)>& f,
                                      std::vector<double> x, double h = 1e-6);

// sum_i a[i] * b[i]: turns an output into a scalar loss with a random probe as upstream grad.
double Dot(std::span<const double> a, std::span<const double> b);

// Host <-> tensor copies for tests (any device; synchronous).
template <typename T>
Tensor MakeTensor(Allocator& alloc, DType dtype, Shape shape, std::span<const T> host) {
  Result<Tensor> t = Tensor::Empty(alloc, dtype, shape);
  TANDEM_CHECK_OK(t.status());
  TANDEM_CHECK_MSG(static_cast<int64_t>(host.size_bytes()) == t->nbytes(), "size mismatch {}",
                   shape.ToString());
  TANDEM_CHECK_OK(CopyFromHost(t->view(), host.data(), nullptr));
  TANDEM_CHECK_OK(SynchronizeStream(t->device(), nullptr));
  return std::move(t).value();
}
template <typename T>
std::vector<T> ToHost(const TensorView& v) {
  std::vector<T> out(v.nbytes() / sizeof(T));
  TANDEM_CHECK_OK(CopyToHost(out.data(), v, nullptr));
  TANDEM_CHECK_OK(SynchronizeStream(v.device(), nullptr));
  return out;
}

}  // namespace tandem::kernels::testing
