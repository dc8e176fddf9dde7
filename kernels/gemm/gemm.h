// GEMM: C[M,N] = alpha * op(A) op(B) + beta * C (+ bias[N]), row-major, bf16 inputs with
// fp32 accumulation, bf16 or fp32 output. The CUDA version runs cuBLASLt; the CPU version
// is a blocked reference (also available in float64 for tests).
//
//   op(A) is [M,K]: A is [M,K], or [K,M] with trans_a.
//   op(B) is [K,N]: B is [K,N], or [N,K] with trans_b.
// Linear forward y = x W^T (W [out,in]):  Gemm(x [R,in], W [out,in], y [R,out], trans_b).
// Weight grad dW += dy^T x into fp32:       Gemm(dy [R,out], x [R,in], dW, trans_a, beta=1).
// Input grad dx = dy W:                     Gemm(dy [R,out], W [out,in], dx [R,in]).
//
// Views must have unit column stride; the row stride (leading dimension) may exceed the
// column count, so Narrow()ed column blocks work. C may not alias A or B.
//
// Thread-safety: a GemmContext may be used from several threads at once (its plan cache is
// mutex-guarded), but its workspace is shared, so calls that use one context must be
// ordered on one stream (or the caller gives each stream its own context).
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"
#include "runtime/core/status.h"

namespace tandem::kernels {

struct GemmOptions {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.f;
  float beta = 0.f;   // beta != 0 reads C (accumulate)
  TensorView bias;    // optional, [N], same dtype as C; fused as a cuBLASLt epilogue
};

// Owns a cuBLASLt handle, one workspace and the per-shape plan cache (matmul descriptor,
// layouts and the heuristic's algorithm) for one CUDA device. CPU GEMMs take nullptr.
class GemmContext {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = 64ull << 20;

  // Makes the handle and allocates the workspace on `device` (sets it current).
  static Result<std::unique_ptr<GemmContext>> Create(int device,
                                                     size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  int device() const;
  size_t workspace_bytes() const;
  size_t cached_plans() const;  // number of distinct shapes planned so far

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  explicit GemmContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

namespace cpu {
// Blocked reference; bf16 A/B, fp32 accumulate, C bf16 or f32. `ctx` and `s` are ignored.
Status Gemm(GemmContext* ctx, const TensorView& a, const TensorView& b, const TensorView& c,
            const GemmOptions& opt, Stream s);
// Same contract in float64 over raw row-major arrays (leading dimension = column count):
// c[M,N] = alpha * op(a) op(b) + beta * c. For tests.
void GemmF64(int64_t m, int64_t n, int64_t k, const double* a, bool trans_a, const double* b,
             bool trans_b, double* c, double alpha, double beta);
}  // namespace cpu

namespace cuda {
// REQUIRES: ctx on the device holding the views. Asynchronous on `s`; no host sync.
Status Gemm(GemmContext* ctx, const TensorView& a, const TensorView& b, const TensorView& c,
            const GemmOptions& opt, Stream s);
}  // namespace cuda

// Dispatches on the views' device. CUDA views in a build without CUDA are an error.
Status Gemm(GemmContext* ctx, const TensorView& a, const TensorView& b, const TensorView& c,
            const GemmOptions& opt, Stream s);

// Shape checks shared by both versions; returns M, N, K through the pointers.
Status CheckGemmArgs(const char* op, const TensorView& a, const TensorView& b,
                     const TensorView& c, const GemmOptions& opt, int64_t* m, int64_t* n,
                     int64_t* k);

}  // namespace tandem::kernels
