// MoeExperts' CUDA paths (kernels/moe/experts.h): kPadded, one strided-batched cuBLAS GEMM
// per projection over the padded layout; kGrouped, one cublasGemmGroupedBatchedEx call per
// projection over the experts with tokens; kStreams, runs of consecutive experts on a pool
// of streams.
//
// The cuBLAS calls run y = x W^T row-major as cuBLAS's column-major C^T [out, rows] = W [out, in] .
// x^T [in, rows]: cuBLAS's A is the weight (transposed), its B the activation rows.
#include <cublas_v2.h>

#include <algorithm>

#include "kernels/core/cuda_check.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/moe/experts_internal.h"

namespace tandem::kernels {

MoeExperts::Impl::~Impl() {
  if (blas != nullptr) cublasDestroy(blas);
  host.Reset();  // before the allocator it came from
}

namespace internal {
namespace {

#define CUBLAS_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                   \
    cublasStatus_t _s = (expr);                                                          \
    if (_s != CUBLAS_STATUS_SUCCESS)                                                     \
      return ::tandem::CudaError("{}:{}: {}: {}", __FILE__, __LINE__, #expr,             \
                                 cublasGetStatusString(_s));                             \
  } while (0)

constexpr size_t kStreamWorkspaceBytes = 16ull << 20;

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
                                                               int64_t max_experts,
                                                               bool with_streams) {
  auto impl = std::make_unique<MoeExperts::Impl>();
  impl->device = alloc.device().index;
  DeviceGuard guard(impl->device);
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&impl->blas));
  const int64_t bytes = 6 * max_experts * static_cast<int64_t>(sizeof(void*));
  ASSIGN_OR_RETURN(impl->pointers, Tensor::Empty(alloc, DType::kU8, {bytes}));
  impl->pinned = std::make_unique<PinnedAllocator>();
  ASSIGN_OR_RETURN(impl->host, Tensor::Empty(*impl->pinned, DType::kU8, {bytes}));
  ASSIGN_OR_RETURN(impl->staged, CudaEvent::Create(impl->device));
  if (with_streams) {
    ASSIGN_OR_RETURN(impl->fork, CudaEvent::Create(impl->device));
    for (int i = 0; i < kMoeExpertStreams; ++i) {
      ASSIGN_OR_RETURN(CudaStream st, CudaStream::Create(impl->device));
      impl->streams.push_back(std::move(st));
      ASSIGN_OR_RETURN(CudaEvent ev, CudaEvent::Create(impl->device));
      impl->joins.push_back(std::move(ev));
      ASSIGN_OR_RETURN(std::unique_ptr<GemmContext> gemm,
                       GemmContext::Create(impl->device, kStreamWorkspaceBytes));
      impl->gemms.push_back(std::move(gemm));
    }
  }
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

namespace {

// Experts [first, last) on one stream: gate|up GEMMs, SwiGLU over the run's rows, down GEMMs.
// A bucket that would reach past the run's last row runs on the exact rows instead, so the
// run touches only its own rows.
Status RunExperts(GemmContext* gemm, const MoeExpertsArgs& a, int64_t first, int64_t last,
                  Stream s) {
  const int64_t begin = a.offsets[first], end = a.offsets[last];
  if (begin == end) return Status::Ok();
  GemmOptions linear;
  linear.trans_b = true;
  auto rows_of = [&](int64_t e) -> int64_t {
    const int64_t count = a.offsets[e + 1] - a.offsets[e], bucket = MoeBucketRows(count);
    return a.offsets[e] + bucket <= end ? bucket : count;
  };
  auto project = [&](const TensorView& w, const TensorView& in, const TensorView& out) -> Status {
    for (int64_t e = first; e < last; ++e) {
      if (a.offsets[e + 1] == a.offsets[e]) continue;
      const int64_t r = rows_of(e);
      RETURN_IF_ERROR(Gemm(gemm, in.Narrow(0, a.offsets[e], r),
                           w.Narrow(0, e, 1).Reshape({w.dim(1), w.dim(2)}),
                           out.Narrow(0, a.offsets[e], r), linear, s));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(project(a.w.gate_up, a.x, a.gate_up));
  const auto [gate, up] = SplitGateUp(a.gate_up.Narrow(0, begin, end - begin));
  RETURN_IF_ERROR(SwiGluForward(a.act.Narrow(0, begin, end - begin), gate, up, s));
  return project(a.w.down, a.act, a.y);
}

}  // namespace

Status MoeExpertsStreams(MoeExperts::Impl* impl, const MoeExpertsArgs& a) {
  const int64_t e_count = a.w.gate_up.dim(0), n = a.offsets[e_count];
  if (n == 0) return Status::Ok();
  if (impl->streams.empty())
    return InvalidArgumentError("MoeExperts: the streams path needs an object made for it "
                                "(MoeExpertsPath::kStreams)");
  NvtxRange range("MoeExpertsStreams");
  const int pool = static_cast<int>(impl->streams.size());
  RETURN_IF_ERROR(impl->fork.Record(a.s));
  // Run j ends at the first expert boundary at or past (j + 1) n / pool rows.
  int64_t first = 0;
  for (int j = 0; j < pool && first < e_count; ++j) {
    const int64_t target = (j + 1) * n / pool;
    int64_t last = first;
    while (last < e_count && (a.offsets[last] < target || last == first)) ++last;
    if (j == pool - 1) last = e_count;
    const Stream st = impl->streams[j].get();
    RETURN_IF_ERROR(impl->streams[j].Wait(impl->fork));
    RETURN_IF_ERROR(RunExperts(impl->gemms[j].get(), a, first, last, st));
    RETURN_IF_ERROR(impl->joins[j].Record(st));
    RETURN_IF_ERROR(StreamWaitEvent(a.s, impl->joins[j]));
    first = last;
  }
  return Status::Ok();
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
