// CPU reference for kernels/linear_attention/gated_delta_rule.h: the recurrent form in
// float64, one document and one value head at a time, the state [dk, dv] row-major.
#include <cmath>
#include <vector>

#include "kernels/linear_attention/gated_delta_rule.h"
#include "kernels/linear_attention/hybrid_ops.h"

namespace tandem::kernels {
namespace internal {

Status CheckGatedDeltaRule(const GatedDeltaRuleArgs& a, int64_t* tokens) {
  constexpr const char* kOp = "GatedDeltaRuleForward";
  if (a.key_heads < 1 || a.value_heads < 1 || a.key_dim < 1 || a.value_dim < 1 ||
      a.value_heads % a.key_heads != 0)
    return InvalidArgumentError(
        "{}: heads and dims must be positive and value_heads ({}) a multiple of key_heads ({})",
        kOp, a.value_heads, a.key_heads);
  RETURN_IF_ERROR(CheckRowView(kOp, "q", a.q, DType::kBF16, -1, a.key_heads * a.key_dim));
  const int64_t t = a.q.dim(0);
  RETURN_IF_ERROR(CheckRowView(kOp, "k", a.k, DType::kBF16, t, a.key_heads * a.key_dim));
  RETURN_IF_ERROR(CheckRowView(kOp, "v", a.v, DType::kBF16, t, a.value_heads * a.value_dim));
  RETURN_IF_ERROR(CheckRowView(kOp, "g", a.g, DType::kF32, t, a.value_heads));
  RETURN_IF_ERROR(CheckRowView(kOp, "beta", a.beta, DType::kF32, t, a.value_heads));
  const DType out_dtype = a.out.dtype() == DType::kF32 ? DType::kF32 : DType::kBF16;
  RETURN_IF_ERROR(CheckRowView(kOp, "out", a.out, out_dtype, t, a.value_heads * a.value_dim));
  RETURN_IF_ERROR(ExpectDType(kOp, "cu_seqlens", a.cu_seqlens, DType::kI32));
  *tokens = t;
  return Status::Ok();
}

}  // namespace internal

namespace {

template <typename T>
const T* Row(const TensorView& t, int64_t r) {
  return t.data_as<T>() + r * t.stride(0);
}

// x (length n, bf16) -> double, L2-normalised as transformers / fla do (rsqrt(sum + 1e-6)),
// times `scale`.
void LoadHead(const bf16* x, int64_t n, bool l2norm, double scale, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = x[i].f();
    ss += out[i] * out[i];
  }
  const double f = (l2norm ? 1.0 / std::sqrt(ss + 1e-6) : 1.0) * scale;
  for (int64_t i = 0; i < n; ++i) out[i] *= f;
}

void StoreOut(const TensorView& out, int64_t t, int64_t col, const double* o, int64_t n) {
  if (out.dtype() == DType::kF32) {
    float* dst = out.data_as<float>() + t * out.stride(0) + col;
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(o[i]);
  } else {
    bf16* dst = out.data_as<bf16>() + t * out.stride(0) + col;
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16(static_cast<float>(o[i]));
  }
}

// One document [begin, end) of value head `vh`.
void RunHead(const GatedDeltaRuleArgs& a, int64_t begin, int64_t end, int64_t vh,
             std::vector<double>& state) {
  const int64_t dk = a.key_dim, dv = a.value_dim;
  const int64_t kh = vh / (a.value_heads / a.key_heads);
  const double scale = a.scale != 0.f ? a.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> q(dk), k(dk), v(dv), delta(dv), o(dv);
  std::fill(state.begin(), state.end(), 0.0);  // S [dk, dv]: restarts per document
  for (int64_t t = begin; t < end; ++t) {
    LoadHead(Row<bf16>(a.q, t) + kh * dk, dk, a.l2norm_qk, scale, q.data());
    LoadHead(Row<bf16>(a.k, t) + kh * dk, dk, a.l2norm_qk, 1.0, k.data());
    const bf16* vr = Row<bf16>(a.v, t) + vh * dv;
    const double decay = std::exp(static_cast<double>(Row<float>(a.g, t)[vh]));
    const double beta = Row<float>(a.beta, t)[vh];
    for (double& s : state) s *= decay;
    for (int64_t j = 0; j < dv; ++j) delta[j] = vr[j].f();
    for (int64_t i = 0; i < dk; ++i) {  // delta = beta (v - S^T k)
      const double* s = &state[i * dv];
      for (int64_t j = 0; j < dv; ++j) delta[j] -= s[j] * k[i];
    }
    for (int64_t j = 0; j < dv; ++j) delta[j] *= beta;
    std::fill(o.begin(), o.end(), 0.0);
    for (int64_t i = 0; i < dk; ++i) {  // S += k delta^T; o = S^T q
      double* s = &state[i * dv];
      for (int64_t j = 0; j < dv; ++j) {
        s[j] += k[i] * delta[j];
        o[j] += s[j] * q[i];
      }
    }
    StoreOut(a.out, t, vh * dv, o.data(), dv);
  }
}

}  // namespace

namespace cpu {

Status GatedDeltaRuleForward(const GatedDeltaRuleArgs& args, Stream) {
  int64_t t = 0;
  RETURN_IF_ERROR(internal::CheckGatedDeltaRule(args, &t));
  RETURN_IF_ERROR(internal::CheckHostCuSeqlens("GatedDeltaRuleForward", args.cu_seqlens, t));
  const int32_t* cu = args.cu_seqlens.data_as<int32_t>();
  std::vector<double> state(static_cast<size_t>(args.key_dim * args.value_dim));
  for (int64_t d = 0; d + 1 < args.cu_seqlens.dim(0); ++d) {
    for (int64_t vh = 0; vh < args.value_heads; ++vh) RunHead(args, cu[d], cu[d + 1], vh, state);
  }
  return Status::Ok();
}

}  // namespace cpu

Status GatedDeltaRuleForward(const GatedDeltaRuleArgs& args, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device device,
                   DispatchDevice("GatedDeltaRuleForward", {args.q, args.k, args.v, args.g,
                                                            args.beta, args.cu_seqlens, args.out}));
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda()) return cuda::GatedDeltaRuleForward(args, s);
#endif
  return cpu::GatedDeltaRuleForward(args, s);
}

}  // namespace tandem::kernels
