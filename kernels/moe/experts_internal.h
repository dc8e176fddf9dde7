// Internal to kernels/moe: the argument check shared by every expert-GEMM path, MoeExperts'
// state, and its CUDA paths (experts_cuda.cc). Thread-safety: as MoeExperts (one Forward at a
// time).
#pragma once

#include <memory>
#include <span>

#include "kernels/core/pinned_allocator.h"
#include "kernels/core/stream.h"
#include "kernels/moe/experts.h"

struct cublasContext;  // cublasHandle_t

namespace tandem::kernels {

// Empty on the CPU.
struct MoeExperts::Impl {
  ~Impl();  // destroys the cuBLAS handle (experts_cuda.cc)
  int device = -1;
  cublasContext* blas = nullptr;  // kGrouped and kPadded
  // The grouped calls' pointer arrays, 6 per expert (A, B, C of each projection): device
  // u8 [6 E 8], staged through `host` (pinned); `staged` follows the last upload, which
  // must finish before `host` is rewritten.
  Tensor pointers;
  std::unique_ptr<PinnedAllocator> pinned;
  Tensor host;
  CudaEvent staged;
  bool staged_pending = false;
};

}  // namespace tandem::kernels

namespace tandem::kernels::internal {

Status CheckMoeExperts(const MoeExpertWeights& w, std::span<const int32_t> offsets,
                       const TensorView& x, const TensorView& gate_up, const TensorView& act,
                       const TensorView& y);
// ForwardPadded's: cap >= every count, buffers of >= E cap rows.
Status CheckMoeExpertsPadded(const MoeExpertWeights& w, std::span<const int32_t> offsets,
                             int64_t cap, const TensorView& x, const TensorView& gate_up,
                             const TensorView& act, const TensorView& y);

#ifdef TANDEM_HAVE_CUDA
struct MoeExpertsArgs {
  const MoeExpertWeights& w;
  std::span<const int32_t> offsets;  // host i32 [E + 1]
  const TensorView &x, &gate_up, &act, &y;
  Stream s;
};

// The CUDA state for up to `max_experts` experts.
Result<std::unique_ptr<MoeExperts::Impl>> CreateMoeExpertsImpl(Allocator& alloc,
                                                               int64_t max_experts);
// REQUIRES: CheckMoeExperts passed; E <= max_experts.
Status MoeExpertsGrouped(MoeExperts::Impl* impl, const MoeExpertsArgs& a);
// REQUIRES: CheckMoeExpertsPadded passed.
Status MoeExpertsPadded(MoeExperts::Impl* impl, const MoeExpertWeights& w, int64_t cap,
                        const TensorView& x, const TensorView& gate_up, const TensorView& act,
                        const TensorView& y, Stream s);
#endif

}  // namespace tandem::kernels::internal
