// CausalVarlenAttention on CUDA: cuDNN's fused flash attention reached through the raw
// backend graph API (no cudnn-frontend), with the own fallback kernel where cuDNN offers no
// engine. The graph is the frontend's composite SDPA forward rebuilt by hand: 4-D [b, h, s, d] tensors over the packed [T, h, d]
// buffers (b = documents, s = bucketed longest document, ragged offsets per document),
// matmul(Q, K^T) -> scale -> padding mask -> causal mask -> softmax (with Stats, which the
// engine's pattern requires) -> matmul(P, V). Plans compile at run time (0.05-1 s), so they
// are cached per (docs, s bucket, hq, hk, d, lse wanted).
#include "kernels/attention/attention.h"

#include <cudnn.h>
#include <cudnn_backend.h>
#include <cuda_runtime_api.h>

#include <cfloat>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/attention/varlen_internal.h"
#include "kernels/core/cuda_check.h"
#include "runtime/core/logging.h"

// The backend API still needs the (deprecated-tagged) handle attributes on 9.x.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define CUDNN_RETURN_IF_ERROR(expr)                                                       \
  do {                                                                                    \
    cudnnStatus_t _s = (expr);                                                            \
    if (_s != CUDNN_STATUS_SUCCESS) {                                                     \
      char _msg[512] = {0};                                                               \
      cudnnGetLastErrorString(_msg, sizeof(_msg));                                        \
      return ::tandem::InternalError("{}:{}: {}: {} ({})", __FILE__, __LINE__, #expr,      \
                                     cudnnGetErrorString(_s), _msg);                      \
    }                                                                                     \
  } while (0)

namespace tandem::kernels {
namespace {

using attention_internal::LaunchCudnnAux;
using attention_internal::LaunchVarlenFallback;
using Dims = std::vector<int64_t>;

// Tensor UIDs of the variant pack; virtual tensors take ids from kFirstVirtual up.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kNegInfPad, kNegInfCausal, kSeqQ, kSeqKv,
  kRaggedQ, kRaggedK, kRaggedV, kRaggedO, kRaggedStats, kFirstVirtual = 100,
};

class Desc {
 public:
  Desc() = default;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  ~Desc() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Status Create(cudnnBackendDescriptorType_t type) {
    CUDNN_RETURN_IF_ERROR(cudnnBackendCreateDescriptor(type, &d_));
    return Status::Ok();
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

Status Set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
           cudnnBackendAttributeType_t t, int64_t n, const void* v) {
  CUDNN_RETURN_IF_ERROR(cudnnBackendSetAttribute(d, a, t, n, v));
  return Status::Ok();
}

// A compiled graph: every descriptor it was built from stays alive with it.
struct Plan {
  std::vector<Desc> descs;
  Desc plan;
  int64_t workspace = 0;
  bool with_stats = false;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(Plan* plan) : plan_(plan) {}

  Result<cudnnBackendDescriptor_t> Tensor(int64_t uid, cudnnDataType_t type, const Dims& dims,
                                          const Dims& strides, bool is_virtual,
                                          bool by_value = false,
                                          cudnnBackendDescriptor_t ragged = nullptr) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t d, New(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    const int64_t align = 16;
    const bool virt = is_virtual, byval = by_value;
    RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data()));
    RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data()));
    RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt));
    if (byval) RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval));
    if (ragged != nullptr)
      RETURN_IF_ERROR(Set(d, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC,
                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(d));
    return d;
  }
  Result<cudnnBackendDescriptor_t> Virtual(cudnnDataType_t type, const Dims& dims,
                                           const Dims& strides) {
    return Tensor(next_virtual_++, type, dims, strides, /*is_virtual=*/true);
  }

  // y = mode(x[, b[, t]]); axis >= 0 only for GEN_INDEX.
  Status Pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                   cudnnBackendDescriptor_t t = nullptr, int64_t axis = -1) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t pw, New(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    RETURN_IF_ERROR(Set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    RETURN_IF_ERROR(Set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    if (axis >= 0) RETURN_IF_ERROR(Set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(pw));
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t op,
                     New(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
    if (b != nullptr) RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b));
    if (t != nullptr) RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(op));
    ops_.push_back(op);
    return Status::Ok();
  }

  Status Reduction(cudnnReduceTensorOp_t red, cudnnBackendDescriptor_t x,
                   cudnnBackendDescriptor_t y) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t rd, New(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    RETURN_IF_ERROR(Set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red));
    RETURN_IF_ERROR(Set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(rd));
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t op,
                     New(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(op));
    ops_.push_back(op);
    return Status::Ok();
  }

  // c = a @ b with per-batch sequence-length overrides (null: none).
  Status Matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t m_override,
                cudnnBackendDescriptor_t n_override, cudnnBackendDescriptor_t k_override) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t mm, New(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    RETURN_IF_ERROR(Set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(mm));
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t op, New(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c));
    RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm));
    if (m_override) RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m_override));
    if (n_override) RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n_override));
    if (k_override) RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k_override));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(op));
    ops_.push_back(op);
    return Status::Ok();
  }

  // Finalizes the operation graph and the first engine config (mode A, then FALLBACK) that
  // yields a plan.
  Status Compile(cudnnHandle_t handle) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t graph, New(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
    RETURN_IF_ERROR(Set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        static_cast<int64_t>(ops_.size()), ops_.data()));
    RETURN_IF_ERROR(Set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(graph));
    std::string why = "no engine config";
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      ASSIGN_OR_RETURN(cudnnBackendDescriptor_t heur, New(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
      RETURN_IF_ERROR(SetDesc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
      RETURN_IF_ERROR(Set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
      if (cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) continue;
      int64_t count = 0;
      if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr) != CUDNN_STATUS_SUCCESS || count <= 0)
        continue;
      std::vector<cudnnBackendDescriptor_t> cfgs(count);
      for (auto& c : cfgs) {
        ASSIGN_OR_RETURN(cudnnBackendDescriptor_t cfg, New(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        c = cfg;
      }
      CUDNN_RETURN_IF_ERROR(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                                     &count, cfgs.data()));
      for (int64_t i = 0; i < count; ++i) {
        Desc plan;
        RETURN_IF_ERROR(plan.Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
        RETURN_IF_ERROR(Set(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
        RETURN_IF_ERROR(SetDesc(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[i]));
        const cudnnStatus_t s = cudnnBackendFinalize(plan.get());
        if (s != CUDNN_STATUS_SUCCESS) {
          char msg[512] = {0};
          cudnnGetLastErrorString(msg, sizeof(msg));
          why = fmt::format("{} ({})", cudnnGetErrorString(s), msg);
          continue;
        }
        CUDNN_RETURN_IF_ERROR(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                       CUDNN_TYPE_INT64, 1, nullptr,
                                                       &plan_->workspace));
        plan_->plan = std::move(plan);
        return Status::Ok();
      }
    }
    return UnavailableError("cuDNN has no engine for the SDPA graph: {}", why);
  }

 private:
  Result<cudnnBackendDescriptor_t> New(cudnnBackendDescriptorType_t type) {
    Desc d;
    RETURN_IF_ERROR(d.Create(type));
    plan_->descs.push_back(std::move(d));
    return plan_->descs.back().get();
  }
  static Status SetDesc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
                        cudnnBackendDescriptor_t v) {
    return Set(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }

  Plan* plan_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

// Builds the composite SDPA forward graph for b documents of at most s tokens.
Result<std::unique_ptr<Plan>> BuildPlan(cudnnHandle_t handle, int64_t b, int64_t s, int64_t hq,
                                        int64_t hk, int64_t d, bool with_stats) {
  auto plan = std::make_unique<Plan>();
  plan->with_stats = with_stats;
  GraphBuilder g(plan.get());
  const auto bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32,
             i64 = CUDNN_DATA_INT64, boolean = CUDNN_DATA_BOOLEAN;
  const Dims one{1, 1, 1, 1}, ragged_dims{b + 1, 1, 1, 1}, batch_dims{b, 1, 1, 1};
  ASSIGN_OR_RETURN(auto rq, g.Tensor(kRaggedQ, i64, ragged_dims, one, false));
  ASSIGN_OR_RETURN(auto rk, g.Tensor(kRaggedK, i64, ragged_dims, one, false));
  ASSIGN_OR_RETURN(auto rv, g.Tensor(kRaggedV, i64, ragged_dims, one, false));
  ASSIGN_OR_RETURN(auto ro, g.Tensor(kRaggedO, i64, ragged_dims, one, false));
  // Token-interleaved layouts: element (doc, h, pos, c) of Q sits at ragged[doc] +
  // pos*hq*d + h*d + c. K is handed over as K^T [b, hk, d, s].
  ASSIGN_OR_RETURN(auto q, g.Tensor(kQ, bf, {b, hq, s, d}, {s * hq * d, d, hq * d, 1}, false, false, rq));
  ASSIGN_OR_RETURN(auto kt, g.Tensor(kK, bf, {b, hk, d, s}, {s * hk * d, d, 1, hk * d}, false, false, rk));
  ASSIGN_OR_RETURN(auto v, g.Tensor(kV, bf, {b, hk, s, d}, {s * hk * d, d, hk * d, 1}, false, false, rv));
  ASSIGN_OR_RETURN(auto o, g.Tensor(kO, bf, {b, hq, s, d}, {s * hq * d, d, hq * d, 1}, false, false, ro));
  ASSIGN_OR_RETURN(auto seq_q, g.Tensor(kSeqQ, i32, batch_dims, one, false));
  ASSIGN_OR_RETURN(auto seq_kv, g.Tensor(kSeqKv, i32, batch_dims, one, false));
  ASSIGN_OR_RETURN(auto scale, g.Tensor(kScale, f32, one, one, false, true));
  ASSIGN_OR_RETURN(auto neg_pad, g.Tensor(kNegInfPad, f32, one, one, false, true));
  ASSIGN_OR_RETURN(auto neg_causal, g.Tensor(kNegInfCausal, f32, one, one, false, true));

  const Dims sdims{b, hq, s, s}, sstr{hq * s * s, s * s, s, 1};
  const Dims rdims{b, hq, s, 1}, rstr{hq * s, s, 1, 1};
  ASSIGN_OR_RETURN(auto s1, g.Virtual(f32, sdims, sstr));
  RETURN_IF_ERROR(g.Matmul(q, kt, s1, seq_q, seq_kv, nullptr));
  ASSIGN_OR_RETURN(auto s2, g.Virtual(f32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_MUL, f32, s1, scale, s2));
  // Padding mask: row < seq_q and col < seq_kv.
  ASSIGN_OR_RETURN(auto row, g.Virtual(i32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, s2, nullptr, row, nullptr, 2));
  ASSIGN_OR_RETURN(auto col, g.Virtual(i32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, s2, nullptr, col, nullptr, 3));
  ASSIGN_OR_RETURN(auto row_ok, g.Virtual(i32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_CMP_LT, i32, row, seq_q, row_ok));
  ASSIGN_OR_RETURN(auto col_ok, g.Virtual(i32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_CMP_LT, i32, col, seq_kv, col_ok));
  ASSIGN_OR_RETURN(auto in_bounds, g.Virtual(boolean, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_LOGICAL_AND, boolean, row_ok, col_ok, in_bounds));
  ASSIGN_OR_RETURN(auto s3, g.Virtual(f32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s2, neg_pad, s3, in_bounds));
  // Causal mask (top-left, i.e. per document with ragged offsets): row >= col.
  ASSIGN_OR_RETURN(auto crow, g.Virtual(i32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, s3, nullptr, crow, nullptr, 2));
  ASSIGN_OR_RETURN(auto ccol, g.Virtual(i32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, s3, nullptr, ccol, nullptr, 3));
  ASSIGN_OR_RETURN(auto causal, g.Virtual(boolean, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_CMP_GE, boolean, crow, ccol, causal));
  ASSIGN_OR_RETURN(auto s4, g.Virtual(f32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s3, neg_causal, s4, causal));
  // Softmax with Stats = max + log(sum).
  ASSIGN_OR_RETURN(auto mx, g.Virtual(f32, rdims, rstr));
  RETURN_IF_ERROR(g.Reduction(CUDNN_REDUCE_TENSOR_MAX, s4, mx));
  ASSIGN_OR_RETURN(auto sub, g.Virtual(f32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_SUB, f32, s4, mx, sub));
  ASSIGN_OR_RETURN(auto ex, g.Virtual(f32, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_EXP, f32, sub, nullptr, ex));
  ASSIGN_OR_RETURN(auto sum, g.Virtual(f32, rdims, rstr));
  RETURN_IF_ERROR(g.Reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum));
  ASSIGN_OR_RETURN(auto lg, g.Virtual(f32, rdims, rstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, lg));
  cudnnBackendDescriptor_t stats;
  if (with_stats) {
    ASSIGN_OR_RETURN(auto rs, g.Tensor(kRaggedStats, i64, ragged_dims, one, false));
    ASSIGN_OR_RETURN(stats, g.Tensor(kStats, f32, rdims, {s * hq, 1, hq, 1}, false, false, rs));
  } else {
    ASSIGN_OR_RETURN(stats, g.Virtual(f32, rdims, rstr));
  }
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_ADD, f32, mx, lg, stats));
  ASSIGN_OR_RETURN(auto pr, g.Virtual(bf, sdims, sstr));
  RETURN_IF_ERROR(g.Pointwise(CUDNN_POINTWISE_DIV, f32, ex, sum, pr));
  RETURN_IF_ERROR(g.Matmul(pr, v, o, seq_q, nullptr, seq_kv));
  RETURN_IF_ERROR(g.Compile(handle));
  return plan;
}

int64_t Bucket(int64_t len) {
  int64_t s = 64;
  while (s < len) s *= 2;
  return s;
}

int64_t AlignUp(int64_t x) { return (x + 255) / 256 * 256; }

class CausalVarlenAttentionImpl final : public CausalVarlenAttention {
 public:
  CausalVarlenAttentionImpl(AttentionBackend backend, cudnnHandle_t handle)
      : backend_(backend), handle_(handle) {}
  ~CausalVarlenAttentionImpl() override {
    plans_.clear();
    if (buffer_ != nullptr) CUDA_LOG_IF_ERROR(cudaFree(buffer_));
    if (handle_ != nullptr) {
      const cudnnStatus_t st = cudnnDestroy(handle_);
      if (st != CUDNN_STATUS_SUCCESS) TLOG_ERROR("cudnnDestroy: {}", cudnnGetErrorString(st));
    }
  }

  Status Forward(const TensorView& q, const TensorView& k, const TensorView& v,
                 const TensorView& cu_seqlens, int max_seqlen, float scale, TensorView out,
                 TensorView lse, Stream stream) override {
    constexpr const char* kOp = "CausalVarlenAttention::Forward";
    ASSIGN_OR_RETURN(VarlenDims dims, CheckVarlenInputs(kOp, q, k, v, cu_seqlens, out, lse));
    if (!q.device().is_cuda() || !cu_seqlens.device().is_cuda())
      return InvalidArgumentError("{}: tensors must be on a CUDA device", kOp);
    if (max_seqlen < 1) return InvalidArgumentError("{}: max_seqlen {} < 1", kOp, max_seqlen);
    const float sc = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(dims.d));
    float* lse_ptr = lse.empty() ? nullptr : lse.data_as<float>();
    if (dims.t == 0) return Status::Ok();
    const Plan* plan = nullptr;
    if (backend_ != AttentionBackend::kFallback) {
      auto p = GetPlan(dims, max_seqlen, lse_ptr != nullptr);
      if (p.ok()) plan = p.value();
      else if (backend_ == AttentionBackend::kCudnn) return p.status();
    }
    if (plan == nullptr) {
      last_backend_ = "fallback";
      if (dims.d != 64 && dims.d != 128 && dims.d != 256)
        return InvalidArgumentError("{}: head_dim {} not supported by the fallback kernel", kOp,
                                    dims.d);
      CUDA_RETURN_IF_ERROR(LaunchVarlenFallback(dims.t, dims.docs, dims.hq, dims.hk, dims.d, q.data(), k.data(), v.data(),
                                                cu_seqlens.data_as<int32_t>(), sc, out.data(),
                                                lse_ptr, stream));
      return Status::Ok();
    }
    last_backend_ = "cudnn";
    // Buffer layout: [workspace | seq_len i32 [docs] | ragged q, kv, stats i64 [docs+1]].
    const int64_t ws = AlignUp(plan->workspace), seq_bytes = AlignUp(dims.docs * 4),
                  rag_bytes = AlignUp((dims.docs + 1) * 8);
    RETURN_IF_ERROR(Reserve(ws + seq_bytes + 3 * rag_bytes, stream));
    char* base = static_cast<char*>(buffer_);
    auto* seq_len = reinterpret_cast<int32_t*>(base + ws);
    auto* rq = reinterpret_cast<int64_t*>(base + ws + seq_bytes);
    auto* rkv = reinterpret_cast<int64_t*>(base + ws + seq_bytes + rag_bytes);
    auto* rs = reinterpret_cast<int64_t*>(base + ws + seq_bytes + 2 * rag_bytes);
    CUDA_RETURN_IF_ERROR(
        LaunchCudnnAux(dims.docs, dims.hq, dims.hk, dims.d, cu_seqlens.data_as<int32_t>(), seq_len, rq, rkv, rs, stream));

    const float neg = -FLT_MAX;
    std::vector<int64_t> uids = {kQ, kK, kV, kO, kScale, kNegInfPad, kNegInfCausal, kSeqQ,
                                 kSeqKv, kRaggedQ, kRaggedK, kRaggedV, kRaggedO};
    std::vector<void*> ptrs = {q.data(), k.data(), v.data(), out.data(),
                               const_cast<float*>(&sc), const_cast<float*>(&neg),
                               const_cast<float*>(&neg), seq_len, seq_len, rq, rkv, rkv, rq};
    if (plan->with_stats) {
      uids.insert(uids.end(), {kStats, kRaggedStats});
      ptrs.insert(ptrs.end(), {lse_ptr, rs});
    }
    Desc pack;
    RETURN_IF_ERROR(pack.Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
    void* workspace = buffer_;
    RETURN_IF_ERROR(Set(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                        static_cast<int64_t>(uids.size()), uids.data()));
    RETURN_IF_ERROR(Set(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                        static_cast<int64_t>(ptrs.size()), ptrs.data()));
    RETURN_IF_ERROR(Set(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
    CUDNN_RETURN_IF_ERROR(cudnnBackendFinalize(pack.get()));
    CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle_, stream));
    CUDNN_RETURN_IF_ERROR(cudnnBackendExecute(handle_, plan->plan.get(), pack.get()));
    return Status::Ok();
  }

  const char* last_backend() const override { return last_backend_; }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

  // The cached plan, or an error (also cached) when cuDNN has no engine for this key.
  Result<const Plan*> GetPlan(const VarlenDims& dims, int max_seqlen, bool with_stats) {
    const Key key{dims.docs, Bucket(max_seqlen), dims.hq, dims.hk, dims.d, with_stats};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      auto built = BuildPlan(handle_, dims.docs, Bucket(max_seqlen), dims.hq, dims.hk, dims.d,
                             with_stats);
      if (!built.ok())
        TLOG_WARN("cuDNN SDPA plan (docs {}, s {}, heads {}/{}, d {}) unavailable: {}",
                  dims.docs, Bucket(max_seqlen), dims.hq, dims.hk, dims.d,
                  built.status().ToString());
      it = plans_.emplace(key, built.ok() ? std::move(built).value() : nullptr).first;
      if (!built.ok()) failures_[key] = built.status();
    }
    if (it->second == nullptr) return failures_[key];
    return static_cast<const Plan*>(it->second.get());
  }

  // Grows the device buffer; the old one may still be read by queued work, so wait first.
  Status Reserve(int64_t bytes, Stream stream) {
    if (bytes <= capacity_) return Status::Ok();
    if (buffer_ != nullptr) {
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      CUDA_RETURN_IF_ERROR(cudaFree(buffer_));
      buffer_ = nullptr;
    }
    CUDA_RETURN_IF_ERROR(cudaMalloc(&buffer_, bytes));
    capacity_ = bytes;
    return Status::Ok();
  }

  AttentionBackend backend_;
  cudnnHandle_t handle_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::map<Key, Status> failures_;
  void* buffer_ = nullptr;
  int64_t capacity_ = 0;
  const char* last_backend_ = "none";
};

}  // namespace

Result<std::unique_ptr<CausalVarlenAttention>> CausalVarlenAttention::Create(
    int device, AttentionBackend backend) {
  int current = -1;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (current != device)
    return InvalidArgumentError("CausalVarlenAttention::Create: device {} is not current ({})",
                                device, current);
  static std::once_flag logged;
  std::call_once(logged, [] {
    TLOG_INFO("cuDNN {} loaded (built against {})", cudnnGetVersion(), CUDNN_VERSION);
  });
  cudnnHandle_t handle = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreate(&handle));
  return std::unique_ptr<CausalVarlenAttention>(
      std::make_unique<CausalVarlenAttentionImpl>(backend, handle));
}

}  // namespace tandem::kernels
