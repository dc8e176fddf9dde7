// Test helpers for the math ops (GEMM, LM head + CE, AdamW): seeded random fills of host
// buffers and a max-error report for comparing an op against a reference.
// Header-only, for tests and benchmarks; not part of the kernels library API.
// Thread-safety: free functions on caller-owned buffers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "runtime/core/status.h"
#endif

namespace tandem::kernels::testing {

// n bf16 values uniform in [lo, hi), deterministic for a seed.
inline std::vector<bf16> RandomBf16(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<bf16> out(static_cast<size_t>(n));
  for (auto& x : out) x = bf16(dist(rng));
  return out;
}

inline std::vector<float> RandomF32(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto& x : out) x = dist(rng);
  return out;
}

inline std::vector<int32_t> RandomI32(int64_t n, uint64_t seed, int32_t lo, int32_t hi_exclusive) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi_exclusive - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& x : out) x = dist(rng);
  return out;
}

inline std::vector<float> ToFloat(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].f();
  return out;
}

// Largest violation of |got - want| <= atol + rtol * |want| over the elements; `ok` is true
// when none is violated. `where` names the first worst element for the failure message.
struct CloseReport {
  bool ok = true;
  double max_abs_err = 0;
  double worst_excess = 0;  // largest |err| - (atol + rtol*|want|); > 0 means a violation
  int64_t worst_index = -1;
  double worst_got = 0, worst_want = 0;
  std::string ToString() const {
    return fmt::format("max_abs_err={:.3g} worst at [{}]: got {:.6g} want {:.6g} (excess {:.3g})",
                       max_abs_err, worst_index, worst_got, worst_want, worst_excess);
  }
};

template <typename GetGot, typename GetWant>
CloseReport CompareClose(int64_t n, GetGot got, GetWant want, double atol, double rtol) {
  CloseReport r;
  r.worst_excess = -1e300;
  for (int64_t i = 0; i < n; ++i) {
    double g = static_cast<double>(got(i)), w = static_cast<double>(want(i));
    double err = std::fabs(g - w);
    if (!std::isfinite(g) && !(std::isnan(g) && std::isnan(w))) err = INFINITY;
    double excess = err - (atol + rtol * std::fabs(w));
    if (err > r.max_abs_err) r.max_abs_err = err;
    if (excess > r.worst_excess) {
      r.worst_excess = excess;
      r.worst_index = i;
      r.worst_got = g;
      r.worst_want = w;
    }
  }
  r.ok = n == 0 || r.worst_excess <= 0;
  return r;
}

// Float64 naive LM head + weighted cross-entropy with full [R, V] logits: the ground truth
// for LmHeadCrossEntropy. x [R, H], w [V, H]; fills loss, logits [R, V] and dx [R, H].
struct NaiveCe {
  double loss = 0;
  std::vector<double> logits, dx;
};
inline NaiveCe NaiveLmHeadCe(int64_t rows, int64_t h, int64_t v, const std::vector<double>& x,
                             const std::vector<double>& w, const std::vector<int32_t>& targets,
                             const std::vector<float>& row_weights) {
  NaiveCe out;
  out.logits.assign(static_cast<size_t>(rows * v), 0.0);
  out.dx.assign(static_cast<size_t>(rows * h), 0.0);
  double wsum = 0;
  auto valid = [&](int64_t r) {
    return targets[r] >= 0 && targets[r] < v && row_weights[r] != 0.f;
  };
  for (int64_t r = 0; r < rows; ++r) wsum += valid(r) ? row_weights[r] : 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double* l = &out.logits[r * v];
    double mx = -INFINITY;
    for (int64_t j = 0; j < v; ++j) {
      for (int64_t k = 0; k < h; ++k) l[j] += x[r * h + k] * w[j * h + k];
      mx = std::max(mx, l[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(l[j] - mx);
    double lse = mx + std::log(sum);
    if (!valid(r) || wsum == 0) continue;
    double scale = row_weights[r] / wsum;
    out.loss += scale * (lse - l[targets[r]]);
    for (int64_t j = 0; j < v; ++j) {
      double g = (std::exp(l[j] - lse) - (j == targets[r] ? 1.0 : 0.0)) * scale;
      for (int64_t k = 0; k < h; ++k) out.dx[r * h + k] += g * w[j * h + k];
    }
  }
  return out;
}

#ifdef TANDEM_HAVE_CUDA
// A cudaMalloc'd copy of a host vector, freed on destruction (tests only; the trainer's
// buffers come from the device pool).
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : n_(static_cast<int64_t>(host.size())) {
    TANDEM_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(1, host.size()) * sizeof(T)) == cudaSuccess);
    if (!host.empty())
      TANDEM_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T),
                              cudaMemcpyHostToDevice) == cudaSuccess);
  }
  explicit DeviceArray(int64_t n) : DeviceArray(std::vector<T>(static_cast<size_t>(n))) {}
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  int64_t size() const { return n_; }
  std::vector<T> ToHost() const {
    std::vector<T> out(static_cast<size_t>(n_));
    TANDEM_CHECK(cudaDeviceSynchronize() == cudaSuccess);
    if (n_ > 0)
      TANDEM_CHECK(cudaMemcpy(out.data(), ptr_, out.size() * sizeof(T), cudaMemcpyDeviceToHost) ==
                   cudaSuccess);
    return out;
  }
  TensorView View(DType dtype, Shape shape, int device = 0) const {
    return TensorView(ptr_, dtype, shape, Device::Cuda(device));
  }

 private:
  T* ptr_ = nullptr;
  int64_t n_ = 0;
};
#endif  // TANDEM_HAVE_CUDA

}  // namespace tandem::kernels::testing
