// CPU references of decode_step.h, the shared argument checks and the dispatchers.
//   conv: fp32 sums in tap order, one bf16 rounding per output (CausalConv1dSiluForward's
//         arithmetic, so a zero state reproduces a document start exactly);
//   delta rule: per token the float64 math of gated_delta_rule_cpu.cc, the state rounded to
//         fp32 after every token (see the header for why).
#include <cmath>
#include <vector>

#include "kernels/linear_attention/decode_step.h"
#include "kernels/linear_attention/hybrid_ops.h"

namespace tandem::kernels {
namespace internal {
namespace {

bool Overlap(const TensorView& a, const TensorView& b) {
  const char* pa = static_cast<const char*>(a.data());
  const char* pb = static_cast<const char*>(b.data());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace

Status CheckConvStep(const TensorView& out, const TensorView& history, const TensorView& x,
                     const TensorView& state, const TensorView& w, int64_t* n, int64_t* k) {
  constexpr const char* kOp = "CausalConv1dSiluStep";
  RETURN_IF_ERROR(CheckRowView(kOp, "x", x, DType::kBF16, -1, -1));
  const int64_t rows = x.dim(0), c = x.dim(1);
  if (rows < 1) return InvalidArgumentError("{}: x has no rows", kOp);
  RETURN_IF_ERROR(CheckRowView(kOp, "out", out, DType::kBF16, rows, c));
  RETURN_IF_ERROR(ExpectDType(kOp, "w", w, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "w", w));
  if (w.ndim() != 2 || w.dim(0) != c || w.dim(1) < 1)
    return InvalidArgumentError("{}: w must be bf16 [{}, K], got {}", kOp, c, w.ToString());
  const int64_t taps = w.dim(1);
  RETURN_IF_ERROR(ExpectDType(kOp, "state", state, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "state", state));
  RETURN_IF_ERROR(ExpectShape(kOp, "state", state, Shape{taps - 1, c}));
  RETURN_IF_ERROR(ExpectDType(kOp, "history", history, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "history", history));
  if (history.ndim() != 2 || history.dim(1) != c || history.dim(0) < taps - 1 ||
      history.dim(0) > taps - 1 + rows)
    return InvalidArgumentError("{}: history must be bf16 [R, {}] with {} <= R <= {}, got {}", kOp,
                                c, taps - 1, taps - 1 + rows, history.ToString());
  if (Overlap(history, state))
    return InvalidArgumentError("{}: history {} overlaps state {}", kOp, history.ToString(),
                                state.ToString());
  for (const TensorView* t : {&out, &history, &state, &w})
    RETURN_IF_ERROR(ExpectSameDevice(kOp, x, *t));
  *n = rows;
  *k = taps;
  return Status::Ok();
}

Status CheckGatedDeltaRuleStep(const GatedDeltaRuleStepArgs& s, int64_t* n) {
  constexpr const char* kOp = "GatedDeltaRuleStep";
  const GatedDeltaRuleArgs& a = s.rule;
  if (a.key_heads < 1 || a.value_heads < 1 || a.key_dim < 1 || a.value_dim < 1 ||
      a.value_heads % a.key_heads != 0)
    return InvalidArgumentError(
        "{}: heads and dims must be positive and value_heads ({}) a multiple of key_heads ({})",
        kOp, a.value_heads, a.key_heads);
  RETURN_IF_ERROR(CheckRowView(kOp, "q", a.q, DType::kBF16, -1, a.key_heads * a.key_dim));
  const int64_t t = a.q.dim(0);
  if (t < 1) return InvalidArgumentError("{}: no tokens", kOp);
  RETURN_IF_ERROR(CheckRowView(kOp, "k", a.k, DType::kBF16, t, a.key_heads * a.key_dim));
  RETURN_IF_ERROR(CheckRowView(kOp, "v", a.v, DType::kBF16, t, a.value_heads * a.value_dim));
  RETURN_IF_ERROR(CheckRowView(kOp, "g", a.g, DType::kF32, t, a.value_heads));
  RETURN_IF_ERROR(CheckRowView(kOp, "beta", a.beta, DType::kF32, t, a.value_heads));
  if (!a.out.empty()) {
    const DType od = a.out.dtype() == DType::kF32 ? DType::kF32 : DType::kBF16;
    RETURN_IF_ERROR(CheckRowView(kOp, "out", a.out, od, t, a.value_heads * a.value_dim));
    RETURN_IF_ERROR(ExpectSameDevice(kOp, a.q, a.out));
  }
  const Shape st{a.value_heads, a.key_dim, a.value_dim};
  for (const auto& [what, v] : {std::pair{"state_in", &s.state_in}, {"state_out", &s.state_out}}) {
    RETURN_IF_ERROR(ExpectDType(kOp, what, *v, DType::kF32));
    RETURN_IF_ERROR(ExpectContiguous(kOp, what, *v));
    RETURN_IF_ERROR(ExpectShape(kOp, what, *v, st));
  }
  if (s.state_in.data() != s.state_out.data() && Overlap(s.state_in, s.state_out))
    return InvalidArgumentError("{}: state_in and state_out overlap without being the same", kOp);
  for (const TensorView* v : {&a.k, &a.v, &a.g, &a.beta, &s.state_in, &s.state_out})
    RETURN_IF_ERROR(ExpectSameDevice(kOp, a.q, *v));
  *n = t;
  return Status::Ok();
}

}  // namespace internal

namespace {

// The same expression as hybrid_ops_cpu.cc's, so the outputs agree bitwise.
float Silu(float x) { return x * (1.f / (1.f + std::exp(-x))); }

template <typename T>
const T* Row(const TensorView& t, int64_t r) {
  return t.data_as<T>() + r * t.stride(0);
}

// As gated_delta_rule_cpu.cc: bf16 -> double, L2-normalised (rsqrt(sum + 1e-6)), times scale.
void LoadHead(const bf16* x, int64_t n, bool l2norm, double scale, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = x[i].f();
    ss += out[i] * out[i];
  }
  const double f = (l2norm ? 1.0 / std::sqrt(ss + 1e-6) : 1.0) * scale;
  for (int64_t i = 0; i < n; ++i) out[i] *= f;
}

// Tokens [0, n) of value head `vh` from `state` ([dk, dv], fp32, updated in place).
void StepHead(const GatedDeltaRuleArgs& a, int64_t n, int64_t vh, float* state) {
  const int64_t dk = a.key_dim, dv = a.value_dim;
  const int64_t kh = vh / (a.value_heads / a.key_heads);
  const double scale = a.scale != 0.f ? a.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> q(dk), k(dk), delta(dv), o(dv), s(dk * dv);
  for (int64_t t = 0; t < n; ++t) {
    LoadHead(Row<bf16>(a.q, t) + kh * dk, dk, a.l2norm_qk, scale, q.data());
    LoadHead(Row<bf16>(a.k, t) + kh * dk, dk, a.l2norm_qk, 1.0, k.data());
    const bf16* vr = Row<bf16>(a.v, t) + vh * dv;
    const double decay = std::exp(static_cast<double>(Row<float>(a.g, t)[vh]));
    const double beta = Row<float>(a.beta, t)[vh];
    for (int64_t i = 0; i < dk * dv; ++i) s[i] = static_cast<double>(state[i]) * decay;
    for (int64_t j = 0; j < dv; ++j) delta[j] = vr[j].f();
    for (int64_t i = 0; i < dk; ++i)  // delta = beta (v - S^T k)
      for (int64_t j = 0; j < dv; ++j) delta[j] -= s[i * dv + j] * k[i];
    for (int64_t j = 0; j < dv; ++j) delta[j] *= beta;
    std::fill(o.begin(), o.end(), 0.0);
    for (int64_t i = 0; i < dk; ++i) {  // S += k delta^T; o = S^T q
      for (int64_t j = 0; j < dv; ++j) {
        double& x = s[i * dv + j];
        x += k[i] * delta[j];
        o[j] += x * q[i];
        state[i * dv + j] = static_cast<float>(x);
      }
    }
    if (a.out.empty()) continue;
    if (a.out.dtype() == DType::kF32) {
      float* dst = a.out.data_as<float>() + t * a.out.stride(0) + vh * dv;
      for (int64_t j = 0; j < dv; ++j) dst[j] = static_cast<float>(o[j]);
    } else {
      bf16* dst = a.out.data_as<bf16>() + t * a.out.stride(0) + vh * dv;
      for (int64_t j = 0; j < dv; ++j) dst[j] = bf16(static_cast<float>(o[j]));
    }
  }
}

}  // namespace

namespace cpu {

Status CausalConv1dSiluStep(TensorView out, TensorView history, TensorView x, TensorView state,
                            TensorView w, Stream) {
  int64_t n = 0, k = 0;
  RETURN_IF_ERROR(internal::CheckConvStep(out, history, x, state, w, &n, &k));
  const int64_t c = x.dim(1), total = k - 1 + n;
  auto cat = [&](int64_t r) {  // row r of [state; x]
    return r < k - 1 ? state.data_as<bf16>() + r * c : Row<bf16>(x, r - (k - 1));
  };
  std::vector<float> acc(static_cast<size_t>(c));
  const bf16* wp = w.data_as<bf16>();
  for (int64_t i = 0; i < n; ++i) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t j = 0; j < k; ++j) {
      const bf16* xr = cat(i + j);
      for (int64_t ch = 0; ch < c; ++ch) acc[ch] += wp[ch * k + j].f() * xr[ch].f();
    }
    bf16* o = out.data_as<bf16>() + i * out.stride(0);
    for (int64_t ch = 0; ch < c; ++ch) o[ch] = bf16(Silu(acc[ch]));
  }
  const int64_t r = history.dim(0);
  for (int64_t i = 0; i < r; ++i) {
    const bf16* src = cat(total - r + i);
    std::copy(src, src + c, history.data_as<bf16>() + i * c);
  }
  return Status::Ok();
}

Status GatedDeltaRuleStep(const GatedDeltaRuleStepArgs& args, Stream) {
  int64_t n = 0;
  RETURN_IF_ERROR(internal::CheckGatedDeltaRuleStep(args, &n));
  if (!args.rule.q.device().is_cpu())
    return InvalidArgumentError("GatedDeltaRuleStep (CPU): tensors must be on the host");
  const GatedDeltaRuleArgs& a = args.rule;
  const int64_t plane = a.key_dim * a.value_dim;
  std::vector<float> state(static_cast<size_t>(plane));
  for (int64_t vh = 0; vh < a.value_heads; ++vh) {
    const float* in = args.state_in.data_as<float>() + vh * plane;
    std::copy(in, in + plane, state.begin());
    StepHead(a, n, vh, state.data());
    std::copy(state.begin(), state.end(), args.state_out.data_as<float>() + vh * plane);
  }
  return Status::Ok();
}

}  // namespace cpu

Status CausalConv1dSiluStep(TensorView out, TensorView history, TensorView x, TensorView state,
                            TensorView w, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device device,
                   DispatchDevice("CausalConv1dSiluStep", {out, history, x, state, w}));
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda()) return cuda::CausalConv1dSiluStep(out, history, x, state, w, s);
#endif
  return cpu::CausalConv1dSiluStep(out, history, x, state, w, s);
}

Status GatedDeltaRuleStep(const GatedDeltaRuleStepArgs& args, Stream s) {
  const GatedDeltaRuleArgs& a = args.rule;
  ASSIGN_OR_RETURN([[maybe_unused]] Device device,
                   DispatchDevice("GatedDeltaRuleStep", {a.q, a.k, a.v, a.g, a.beta, a.out,
                                                         args.state_in, args.state_out}));
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda()) return cuda::GatedDeltaRuleStep(args, s);
#endif
  return cpu::GatedDeltaRuleStep(args, s);
}

}  // namespace tandem::kernels
