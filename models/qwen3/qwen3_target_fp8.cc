// Qwen3Target with precision = "fp8": setup (quantize the projections unless the loader did,
// release their bf16 copies, allocate the e4m3 activation buffer) and the FP8 decoder layer.
#include <algorithm>

#include "kernels/gemm/fp8.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fp8.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/norm/rmsnorm_fp8.h"
#include "models/qwen3/qwen3_target.h"

namespace tandem::models {

using kernels::DType;
using kernels::Fp8GroupActivation;
using kernels::GemmOptions;
using kernels::TensorView;

int64_t Qwen3Target::Fp8InputLayout(const TransformerConfig& c, int64_t max_tokens,
                                    int64_t* code_bytes, int64_t* scales) {
  // One e4m3 buffer serves every GEMM input in turn (each is consumed before the next is
  // produced): [Tp, max K] codes + the scales for that many rows and columns.
  const int64_t tp = kernels::Fp8PaddedRows(max_tokens);
  const int64_t k = std::max({c.hidden_size, c.q_dim(), c.intermediate_size});
  *code_bytes = (tp * k + 255) / 256 * 256;
  *scales = kernels::Fp8ActScaleElems(tp, k);
  return *code_bytes + *scales * 4;
}

Status Qwen3Target::PrepareFp8() {
  const TransformerConfig& c = config();
  if (fp8_.layers().empty()) {
    ASSIGN_OR_RETURN(fp8_, Qwen3Fp8Projections::Quantize(weights_, options_.stream));
    RETURN_IF_ERROR(weights_.ReleaseProjections(options_.stream));
  }
  int64_t code_bytes = 0, scales = 0;
  const int64_t total = Fp8InputLayout(c, options_.max_tokens, &code_bytes, &scales);
  ASSIGN_OR_RETURN(fp8_workspace_, kernels::Tensor::Empty(weights_.allocator(), DType::kU8,
                                                           {total}, options_.stream));
  char* base = static_cast<char*>(fp8_workspace_.data());
  act8_.data = TensorView(base, DType::kF8E4M3, {code_bytes}, device());
  act8_.scale = TensorView(base + code_bytes, DType::kF32, {scales}, device());
  return Status::Ok();
}

Status Qwen3Target::LayerFp8(size_t index, const PackedBatch& batch, int64_t t, int max_seqlen,
                             std::span<const KvSlot> kv) {
  const TransformerConfig& c = config();
  const Qwen3LayerWeights& w = weights_.layers()[index];
  const Qwen3Fp8Layer& f = fp8_.layers()[index];
  const kernels::Stream s = options_.stream;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t tp = kernels::Fp8PaddedRows(t);
  auto rows = [t](const TensorView& v) { return v.Narrow(0, 0, t); };
  auto padded = [tp](const TensorView& v) { return v.Narrow(0, 0, tp); };
  // The e4m3 form of a [t, k] GEMM input: the buffer's first tp * k codes.
  auto act8 = [&](int64_t k) {
    return Fp8GroupActivation{act8_.data.Narrow(0, 0, tp * k).Reshape({tp, k}), act8_.scale};
  };
  const TensorView hidden = rows(act_.hidden);
  kernels::GemmContext* g = gemm_.get();
  GemmOptions linear;
  linear.trans_b = true;
  GemmOptions residual = linear;  // the residual add fused into the GEMM (beta = 1)
  residual.beta = 1.f;

  // Attention block: RMSNorm writes e4m3 directly; the GEMMs write tp >= t rows (the
  // padding rows of the workspace take zeros times the weights).
  const Fp8GroupActivation xh = act8(c.hidden_size);
  RETURN_IF_ERROR(kernels::RmsNormFp8Forward(xh, hidden, w.input_norm, eps, s));
  RETURN_IF_ERROR(kernels::Fp8Gemm(g, xh, f.q_proj, padded(act_.q_raw), linear, s));
  RETURN_IF_ERROR(kernels::Fp8Gemm(g, xh, f.k_proj, padded(act_.k_raw), linear, s));
  RETURN_IF_ERROR(kernels::Fp8Gemm(g, xh, f.v_proj, padded(act_.v), linear, s));
  RETURN_IF_ERROR(AttentionBlockRope(w, batch, t, max_seqlen, kv));
  const Fp8GroupActivation xa = act8(c.q_dim());
  RETURN_IF_ERROR(kernels::QuantizeFp8Activation(rows(act_.attn), xa, s));
  RETURN_IF_ERROR(kernels::Fp8Gemm(g, xa, f.o_proj, padded(act_.hidden), residual, s));

  // MLP block. A MoE block takes the bf16 norm (its router and row gather).
  if (!w.moe.router.empty()) {
    const TensorView normed = rows(act_.normed);
    RETURN_IF_ERROR(kernels::RmsNormForward(normed, {}, hidden, w.post_norm, eps, s));
    kernels::MoeLayerWeights m = w.moe;
    m.experts8 = f.experts;
    return moe_->Forward(g, m, normed, hidden, s);
  }
  RETURN_IF_ERROR(kernels::RmsNormFp8Forward(xh, hidden, w.post_norm, eps, s));
  const TensorView gate_up = padded(act_.gate_up);
  RETURN_IF_ERROR(kernels::Fp8Gemm(g, xh, f.gate_up, gate_up, linear, s));
  const auto [gate, up] = kernels::SplitGateUp(gate_up.Narrow(0, 0, t));
  const Fp8GroupActivation xf = act8(c.intermediate_size);
  RETURN_IF_ERROR(kernels::SwiGluFp8Forward(xf, gate, up, s));
  return kernels::Fp8Gemm(g, xf, f.down_proj, padded(act_.hidden), residual, s);
}

}  // namespace tandem::models
