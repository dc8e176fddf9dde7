// cuBLASLt GEMM behind GemmContext. Row-major C[M,N] = op(A) op(B) is run as the
// column-major product C^T[N,M] = op(B)^T op(A)^T, so cuBLASLt's "A" is our B and its "B"
// is our A, with no data movement. Each distinct (shape, transposes, strides, dtypes,
// epilogue, pointer alignment, FP8 mode, batch) gets one plan: matmul descriptor, three
// layouts and the heuristic's first algorithm, made once and kept for the context's lifetime.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "kernels/core/cuda_check.h"
#include "kernels/gemm/cublas_check.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/fp8_raw.h"
#include "kernels/gemm/gemm.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::kernels {
namespace {

struct PlanKey {
  int64_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b, has_bias, accumulate;
  DType c_type;
  uint16_t align_a, align_b, align_c, align_bias;
  // kPlanFp8Block: e4m3 A/B with VEC128 (our A) and BLK128x128 (our B) scales; kPlanFp8Raw: e4m3
  // A/B with the scalar scales left at their default (1), strided over `batch`.
  uint8_t fp8 = 0;
  int64_t batch = 1;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc}) mix(static_cast<uint64_t>(v));
    mix(k.trans_a | k.trans_b << 1 | k.has_bias << 2 | k.accumulate << 3 |
        static_cast<uint64_t>(k.c_type) << 4 | uint64_t{k.fp8} << 12);
    mix(static_cast<uint64_t>(k.batch));
    mix(k.align_a | uint64_t{k.align_b} << 16 | uint64_t{k.align_c} << 32 |
        uint64_t{k.align_bias} << 48);
    return h;
  }
};

// Largest power of two (<= 256) dividing the address: cuBLASLt's alignment preference.
uint16_t AlignmentOf(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  uint16_t a = 256;
  while (a > 1 && v % a != 0) a >>= 1;
  return a;
}

cudaDataType_t LtType(DType t) { return t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

constexpr uint8_t kPlanFp8Block = 1, kPlanFp8Raw = 2;

// Strides a layout over `batch` matrices `stride` elements apart.
Status SetBatch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride) {
  const int32_t count = static_cast<int32_t>(batch);
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  return Status::Ok();
}

}  // namespace

// One planned GEMM. The bias pointer lives in the descriptor, so calls with a bias hold
// `mu` from setting it until the (asynchronous) launch returns.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::mutex mu;
  ~GemmPlan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct GemmContext::Impl {
  int device = 0;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  mutable std::mutex mu;
  std::unordered_map<PlanKey, std::unique_ptr<GemmPlan>, PlanKeyHash> plans GUARDED_BY(mu);

  ~Impl() {
    plans.clear();
    if (workspace) {
      int prev = 0;
      if (cudaGetDevice(&prev) == cudaSuccess) {
        CUDA_CHECK(cudaSetDevice(device));
        CUDA_CHECK(cudaFree(workspace));
        CUDA_CHECK(cudaSetDevice(prev));
      }
    }
    if (handle) cublasLtDestroy(handle);
  }

  // `fp8_scales`: the A/B scale pointers (cuBLASLt order) of the first FP8 call of a shape;
  // its heuristic refuses block-scaled descriptors without them.
  Result<GemmPlan*> GetPlan(const PlanKey& key, const void* const* fp8_scales = nullptr);
};

Result<GemmPlan*> GemmContext::Impl::GetPlan(const PlanKey& key, const void* const* fp8_scales) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second.get();

  auto plan = std::make_unique<GemmPlan>();
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt A = our B, cuBLASLt B = our A (see the file comment).
  cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (key.has_bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    cudaDataType_t bias_type = LtType(key.c_type);
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // Column-major layouts of the stored buffers: a row-major [r, c] view with row stride ld
  // is a column-major [c, r] matrix with leading dimension ld.
  uint64_t b_rows = key.trans_b ? key.k : key.n, b_cols = key.trans_b ? key.n : key.k;
  uint64_t a_rows = key.trans_a ? key.m : key.k, a_cols = key.trans_a ? key.k : key.m;
  const cudaDataType_t in_type = key.fp8 != 0 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  if (key.fp8 == kPlanFp8Block) {
    // cuBLASLt's A is our weight (128x128 blocks), its B our activation (1x128 groups).
    int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
    if (fp8_scales == nullptr) return InternalError("Gemm: an FP8 plan needs its scale pointers");
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &fp8_scales[0], sizeof(void*)));
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &fp8_scales[1], sizeof(void*)));
  }
  CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->la, in_type, b_rows, b_cols, key.ldb));
  CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->lb, in_type, a_rows, a_cols, key.lda));
  CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->lc, LtType(key.c_type), key.n, key.m, key.ldc));
  if (key.batch > 1) {  // cuBLASLt's A (our B, [n, k] per batch), its B (our A), C
    RETURN_IF_ERROR(SetBatch(plan->la, key.batch, key.n * key.ldb));
    RETURN_IF_ERROR(SetBatch(plan->lb, key.batch, key.m * key.lda));
    RETURN_IF_ERROR(SetBatch(plan->lc, key.batch, key.m * key.ldc));
  }

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  uint64_t ws = workspace_bytes;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  uint32_t align_la = key.align_b, align_lb = key.align_a, align_c = key.align_c;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_la, sizeof(align_la)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_lb, sizeof(align_lb)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->la, plan->lb, plan->lc, plan->lc, pref, 1, &result, &found));
  if (found == 0)
    return CudaError("Gemm: cuBLASLt has no algorithm for M={} N={} K={} trans_a={} trans_b={} "
                     "lda={} ldb={} ldc={} out={} batch={}{}",
                     key.m, key.n, key.k, key.trans_a, key.trans_b, key.lda, key.ldb, key.ldc,
                     DTypeName(key.c_type), key.batch,
                     key.fp8 == kPlanFp8Block ? " (fp8 block-scaled)"
                     : key.fp8 == kPlanFp8Raw ? " (fp8 unscaled, strided batch)" : "");
  plan->algo = result.algo;
  GemmPlan* raw = plan.get();
  plans.emplace(key, std::move(plan));
  return raw;
}

GemmContext::GemmContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmContext::~GemmContext() = default;
int GemmContext::device() const { return impl_->device; }
size_t GemmContext::workspace_bytes() const { return impl_->workspace_bytes; }
size_t GemmContext::cached_plans() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->plans.size();
}

Result<std::unique_ptr<GemmContext>> GemmContext::Create(int device, size_t workspace_bytes) {
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&impl->handle));
  if (workspace_bytes > 0) CUDA_RETURN_IF_ERROR(cudaMalloc(&impl->workspace, workspace_bytes));
  impl->workspace_bytes = workspace_bytes;
  return std::unique_ptr<GemmContext>(new GemmContext(std::move(impl)));
}

namespace cuda {

Status Gemm(GemmContext* ctx, const TensorView& a, const TensorView& b, const TensorView& c,
            const GemmOptions& opt, Stream s) {
  int64_t m, n, k;
  RETURN_IF_ERROR(CheckGemmArgs("cuda::Gemm", a, b, c, opt, &m, &n, &k));
  if (ctx == nullptr) return InvalidArgumentError("cuda::Gemm: needs a GemmContext");
  if (!a.device().is_cuda() || a.device().index != ctx->device())
    return InvalidArgumentError("cuda::Gemm: views on {} but the GemmContext is for cuda:{}",
                                a.ToString(), ctx->device());
  if (m == 0 || n == 0) return Status::Ok();
  PlanKey key{m,         n,         k,         a.stride(0), b.stride(0), c.stride(0),
              opt.trans_a, opt.trans_b, !opt.bias.empty(), opt.beta != 0.f, c.dtype(),
              AlignmentOf(a.data()), AlignmentOf(b.data()), AlignmentOf(c.data()),
              opt.bias.empty() ? uint16_t{0} : AlignmentOf(opt.bias.data())};
  GemmContext::Impl* impl = ctx->impl();
  ASSIGN_OR_RETURN(GemmPlan* plan, impl->GetPlan(key));
  std::unique_lock<std::mutex> bias_lock(plan->mu, std::defer_lock);
  if (!opt.bias.empty()) {
    bias_lock.lock();
    const void* bias_ptr = opt.bias.data();
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
  }
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(impl->handle, plan->desc, &opt.alpha, b.data(),
                                          plan->la, a.data(), plan->lb, &opt.beta, c.data(),
                                          plan->lc, c.data(), plan->lc, &plan->algo,
                                          impl->workspace, impl->workspace_bytes, s));
  return Status::Ok();
}

Status Fp8Gemm(GemmContext* ctx, const Fp8GroupActivation& a, const Fp8BlockWeight& w,
               const TensorView& c, const GemmOptions& opt, Stream s) {
  constexpr const char* kOp = "cuda::Fp8Gemm";
  RETURN_IF_ERROR(CheckFp8Activation(kOp, a));
  RETURN_IF_ERROR(CheckFp8Weight(kOp, w));
  if (!opt.trans_b || opt.trans_a || !opt.bias.empty())
    return InvalidArgumentError("{}: only y = x W^T without bias (trans_b) is implemented", kOp);
  const int64_t m = a.data.dim(0), k = a.data.dim(1), n = w.rows();
  if (w.cols() != k)
    return InvalidArgumentError("{}: activation has K={} but the weight is {}", kOp, k,
                                w.data.ToString());
  RETURN_IF_ERROR(ExpectDType(kOp, "c", c, DType::kBF16));
  RETURN_IF_ERROR(ExpectShape(kOp, "c", c, Shape{m, n}));
  if (c.stride(1) != 1) return InvalidArgumentError("{}: c needs unit column stride", kOp);
  if (k % 16 != 0 || n % 16 != 0)
    return InvalidArgumentError("{}: FP8 GEMMs need K and N multiples of 16, got K={} N={}", kOp,
                                k, n);
  if (ctx == nullptr) return InvalidArgumentError("{}: needs a GemmContext", kOp);
  for (const TensorView* t : {&a.data, &a.scale, &w.data, &w.scale, &c})
    if (!t->device().is_cuda() || t->device().index != ctx->device())
      return InvalidArgumentError("{}: {} is not on cuda:{}, the GemmContext's device", kOp,
                                  t->ToString(), ctx->device());
  if (m == 0 || n == 0) return Status::Ok();
  PlanKey key{m, n, k, a.data.stride(0), w.data.stride(0), c.stride(0), false, true, false,
              opt.beta != 0.f, c.dtype(), AlignmentOf(a.data.data()), AlignmentOf(w.data.data()),
              AlignmentOf(c.data()), 0, kPlanFp8Block};
  GemmContext::Impl* impl = ctx->impl();
  const void* a_scale = w.scale.data();  // cuBLASLt's A is the weight
  const void* b_scale = a.scale.data();
  const void* scales[2] = {a_scale, b_scale};
  ASSIGN_OR_RETURN(GemmPlan* plan, impl->GetPlan(key, scales));
  // The scale pointers live in the descriptor: hold the plan from setting them to launch.
  std::lock_guard<std::mutex> lock(plan->mu);
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(impl->handle, plan->desc, &opt.alpha, w.data.data(),
                                          plan->la, a.data.data(), plan->lb, &opt.beta, c.data(),
                                          plan->lc, c.data(), plan->lc, &plan->algo,
                                          impl->workspace, impl->workspace_bytes, s));
  return Status::Ok();
}

Status Fp8GemmRaw(GemmContext* ctx, const TensorView& a, const TensorView& w,
                  const TensorView& c, int64_t batch, Stream s) {
  constexpr const char* kOp = "cuda::Fp8GemmRaw";
  RETURN_IF_ERROR(internal::CheckFp8GemmRaw(kOp, a, w, c, batch));
  const int64_t m = a.dim(0) / batch, k = a.dim(1), n = w.dim(1);
  if (k % 16 != 0 || n % 16 != 0)
    return InvalidArgumentError("{}: FP8 GEMMs need K and N multiples of 16, got K={} N={} "
                                "(batch {} of M={})", kOp, k, n, batch, m);
  if (ctx == nullptr) return InvalidArgumentError("{}: needs a GemmContext", kOp);
  for (const TensorView* t : {&a, &w, &c})
    if (!t->device().is_cuda() || t->device().index != ctx->device())
      return InvalidArgumentError("{}: {} is not on cuda:{}, the GemmContext's device", kOp,
                                  t->ToString(), ctx->device());
  if (m == 0 || n == 0) return Status::Ok();
  PlanKey key{m, n, k, a.stride(0), w.stride(1), c.stride(0), false, true, false, false,
              DType::kBF16, AlignmentOf(a.data()), AlignmentOf(w.data()), AlignmentOf(c.data()),
              0, kPlanFp8Raw, batch};
  GemmContext::Impl* impl = ctx->impl();
  Result<GemmPlan*> plan = impl->GetPlan(key);
  if (!plan.ok())
    return plan.status().WithContext(fmt::format(
        "{}: the unscaled e4m3 plan for batch {} of M={} N={} K={}", kOp, batch, m, n, k));
  const float one = 1.f, zero = 0.f;
  const cublasStatus_t st = cublasLtMatmul(
      impl->handle, (*plan)->desc, &one, w.data(), (*plan)->la, a.data(), (*plan)->lb, &zero,
      c.data(), (*plan)->lc, c.data(), (*plan)->lc, &(*plan)->algo, impl->workspace,
      impl->workspace_bytes, s);
  if (st != CUBLAS_STATUS_SUCCESS)
    return CudaError("{}: cublasLtMatmul failed ({}) for batch {} of M={} N={} K={}", kOp,
                     cublasLtGetStatusString(st), batch, m, n, k);
  return Status::Ok();
}

}  // namespace cuda
}  // namespace tandem::kernels
