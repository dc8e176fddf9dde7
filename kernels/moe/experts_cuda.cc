// MoeExperts' CUDA paths (kernels/moe/experts.h): kPadded, one strided-batched cuBLAS GEMM
// per projection over the padded layout; kGrouped, one cublasGemmGroupedBatchedEx call per
// projection over the experts with tokens.
//
// The cuBLAS calls run the row-major y = x W^T as the column-major y^T = W x^T: cuBLAS's A
// is the weight (transposed: [out, in] row-major is [in, out] column-major), its B the
// activation rows ([rows, in] row-major is x^T, [in, rows], column-major), C is y^T.
#include <cublas_v2.h>

#include <vector>

#include "kernels/core/cuda_check.h"
#include "kernels/gemm/cublas_check.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/moe/experts_internal.h"

namespace tandem::kernels {

MoeExperts::Impl::~Impl() {
  if (blas != nullptr) cublasDestroy(blas);
  host.Reset();  // before the allocator it came from
}

namespace internal {
namespace {

// One projection of every expert with tokens: out[rows of e] = in[rows of e] weight[e]^T.
struct GroupedProjection {
  const TensorView& weight;  // [E, out, in]
  const TensorView& in;      // [P, in]
  const TensorView& out;     // [P, out]
};

// `dev`: the A, B and C pointer arrays (FillPointers) back to back on the device; the group
// sizes and shapes are host arrays, one group of one GEMM per expert.
Status RunGrouped(cublasHandle_t blas, const GroupedProjection& p,
                  std::span<const int32_t> offsets, const std::vector<int>& experts,
                  void* const* dev) {
  const int g = static_cast<int>(experts.size());
  const int m = static_cast<int>(p.weight.dim(1)), k = static_cast<int>(p.weight.dim(2));
  std::vector<int> ms(g, m), ns(g), ks(g, k), lda(g, k), ldb(g, static_cast<int>(p.in.stride(0))),
      ldc(g, static_cast<int>(p.out.stride(0))), sizes(g, 1);
  std::vector<cublasOperation_t> ta(g, CUBLAS_OP_T), tb(g, CUBLAS_OP_N);
  std::vector<float> alpha(g, 1.f), beta(g, 0.f);
  for (int i = 0; i < g; ++i) ns[i] = offsets[experts[i] + 1] - offsets[experts[i]];
  CUBLAS_RETURN_IF_ERROR(cublasGemmGroupedBatchedEx(
      blas, ta.data(), tb.data(), ms.data(), ns.data(), ks.data(), alpha.data(), dev, CUDA_R_16BF,
      lda.data(), dev + g, CUDA_R_16BF, ldb.data(), beta.data(), dev + 2 * g, CUDA_R_16BF,
      ldc.data(), g, sizes.data(), CUBLAS_COMPUTE_32F));
  return Status::Ok();
}

// The A (weight), B (input rows) and C (output rows) pointers of `p` for `experts`, as three
// arrays of experts.size() back to back.
void FillPointers(const GroupedProjection& p, std::span<const int32_t> offsets,
                  const std::vector<int>& experts, void** slots) {
  const int g = static_cast<int>(experts.size());
  const size_t el = DTypeSize(DType::kBF16);
  for (int i = 0; i < g; ++i) {
    const int e = experts[i];
    slots[i] = static_cast<char*>(p.weight.data()) + e * p.weight.stride(0) * el;
    slots[g + i] = static_cast<char*>(p.in.data()) + offsets[e] * p.in.stride(0) * el;
    slots[2 * g + i] = static_cast<char*>(p.out.data()) + offsets[e] * p.out.stride(0) * el;
  }
}

}  // namespace

Result<std::unique_ptr<MoeExperts::Impl>> CreateMoeExpertsImpl(Allocator& alloc,
                                                               int64_t max_experts) {
  auto impl = std::make_unique<MoeExperts::Impl>();
  impl->device = alloc.device().index;
  DeviceGuard guard(impl->device);
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&impl->blas));
  const int64_t bytes = 6 * max_experts * static_cast<int64_t>(sizeof(void*));
  ASSIGN_OR_RETURN(impl->pointers, Tensor::Empty(alloc, DType::kU8, {bytes}));
  impl->pinned = std::make_unique<PinnedAllocator>();
  ASSIGN_OR_RETURN(impl->host, Tensor::Empty(*impl->pinned, DType::kU8, {bytes}));
  ASSIGN_OR_RETURN(impl->staged, CudaEvent::Create(impl->device));
  return impl;
}

Status MoeExpertsGrouped(MoeExperts::Impl* impl, const MoeExpertsArgs& a) {
  const int64_t e_count = a.w.gate_up.dim(0), n = a.offsets[e_count];
  if (n == 0) return Status::Ok();
  NvtxRange range("MoeExpertsGrouped");
  std::vector<int> experts;
  for (int64_t e = 0; e < e_count; ++e)
    if (a.offsets[e + 1] > a.offsets[e]) experts.push_back(static_cast<int>(e));
  const int g = static_cast<int>(experts.size());
  const GroupedProjection gate_up{a.w.gate_up, a.x, a.gate_up};
  const GroupedProjection down{a.w.down, a.act, a.y};
  // The previous upload must have left the staging buffer before it is rewritten.
  if (impl->staged_pending) RETURN_IF_ERROR(impl->staged.Synchronize());
  void** host = impl->host.view().data_as<void*>();
  FillPointers(gate_up, a.offsets, experts, host);
  FillPointers(down, a.offsets, experts, host + 3 * g);
  RETURN_IF_ERROR(CopyFromHost(impl->pointers.view().Narrow(0, 0, 6 * g * sizeof(void*)), host,
                               a.s));
  RETURN_IF_ERROR(impl->staged.Record(a.s));
  impl->staged_pending = true;
  void** dev = impl->pointers.view().data_as<void*>();
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(impl->blas, a.s));
  RETURN_IF_ERROR(RunGrouped(impl->blas, gate_up, a.offsets, experts, dev));
  const auto [gate, up] = SplitGateUp(a.gate_up.Narrow(0, 0, n));
  RETURN_IF_ERROR(SwiGluForward(a.act.Narrow(0, 0, n), gate, up, a.s));
  return RunGrouped(impl->blas, down, a.offsets, experts, dev + 3 * g);
}

Status MoeExpertsPadded(MoeExperts::Impl* impl, const MoeExpertWeights& w, int64_t cap,
                        const TensorView& x, const TensorView& gate_up, const TensorView& act,
                        const TensorView& y, Stream s) {
  NvtxRange range("MoeExpertsPadded");
  const int64_t e = w.gate_up.dim(0), rows = e * cap;
  const float one = 1.f, zero = 0.f;
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(impl->blas, s));
  // out [E cap, m] = in [E cap, k] weight[e]^T per expert: batch e at in + e cap ldb, ...
  auto project = [&](const TensorView& weight, const TensorView& in,
                     const TensorView& out) -> Status {
    const int m = static_cast<int>(weight.dim(1)), k = static_cast<int>(weight.dim(2));
    const int64_t ldb = in.stride(0), ldc = out.stride(0);
    CUBLAS_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(
        impl->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, static_cast<int>(cap), k, &one, weight.data(),
        CUDA_R_16BF, k, weight.stride(0), in.data(), CUDA_R_16BF, static_cast<int>(ldb),
        cap * ldb, &zero, out.data(), CUDA_R_16BF, static_cast<int>(ldc), cap * ldc,
        static_cast<int>(e), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return Status::Ok();
  };
  RETURN_IF_ERROR(project(w.gate_up, x, gate_up));
  const auto [gate, up] = SplitGateUp(gate_up.Narrow(0, 0, rows));
  RETURN_IF_ERROR(SwiGluForward(act.Narrow(0, 0, rows), gate, up, s));
  return project(w.down, act, y);
}

}  // namespace internal
}  // namespace tandem::kernels
