// DFlash drafter backward: from the fused LM head + CE's d(final hidden) back through every
// layer to the parameters, including the context path (each layer's k_proj/v_proj/k_norm
// see the context; their gradients flow into hidden_norm and fc). Matrix gradients go in
// fp32 straight into the flat grads buffer: each matrix's first contribution is a GEMM with
// beta = 0 (no zero-fill of the 4 GB of matrix gradients), the context contribution to
// k_proj/v_proj a second one with beta = 1; only the norm-weight tail, which the RMSNorm
// backwards accumulate into, is zeroed. The context gradient is summed over layers in
// fp32. Activation gradients are bf16, as in a bf16 PyTorch run.
#include "kernels/elementwise/elementwise.h"
#include "kernels/norm/fused_norm.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fused.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_drafter_internal.h"

namespace tandem::models {

using kernels::Shape;
using kernels::TensorView;

TensorView RmsWorkspace(const TensorView& flat, int64_t h) {
  const int64_t rows = kernels::RmsNormBackwardWorkspaceRows();
  return flat.Narrow(0, 0, rows * h).Reshape(Shape{rows, h});
}

Status DFlashDrafter::Backward() {
  const DFlashParamViews& w = params_.w;
  const DFlashParamViews& g = params_.g;
  const int64_t tt = tokens_, h = config_.layers.hidden_size;
  kernels::Stream s = stream_;
  // Matrices [0, matrix_count) are each written once with beta = 0 below (fc, and per layer
  // q/k/v/o/gate_up/down); padding between them stays zero from Create. The tail holds only
  // the norm weights, whose backwards accumulate.
  const int64_t mc = params_.layout.matrix_count;
  RETURN_IF_ERROR(
      kernels::FillZero(params_.grads.view().Narrow(0, mc, params_.layout.total - mc), s));
  RETURN_IF_ERROR(kernels::FillZero(d_ctx_f32_.Narrow(0, 0, tt), s));
  if (config_.dflash2) RETURN_IF_ERROR(SelectorBackward());
  // d_tmp_ holds d loss / d final_hidden from the fused CE (and DFlash2's selector).
  RETURN_IF_ERROR(kernels::RmsNormBackward(d_res_, g.norm, d_tmp_, x_.back(), w.norm,
                                           final_rstd_, RmsWorkspace(rms_workspace_, h), s));
  RETURN_IF_ERROR(Mark("bwd.final_norm"));
  for (int l = config_.layers.num_hidden_layers - 1; l >= 0; --l)
    RETURN_IF_ERROR(LayerBackward(l));
  const TensorView d_ctx = d_ctx_.Narrow(0, 0, tt), d_ctx_pre = d_ctx_pre_.Narrow(0, 0, tt);
  RETURN_IF_ERROR(kernels::Cast(d_ctx, d_ctx_f32_.Narrow(0, 0, tt), s));
  RETURN_IF_ERROR(kernels::RmsNormBackward(d_ctx_pre, g.hidden_norm, d_ctx,
                                           ctx_pre_.Narrow(0, 0, tt), w.hidden_norm,
                                           ctx_rstd_.Narrow(0, 0, tt),
                                           RmsWorkspace(rms_workspace_, h), s));
  RETURN_IF_ERROR(LinearWeightGrad(gemm_.get(), d_ctx_pre, concat_.Narrow(0, 0, tt), g.fc,
                                   false, s));
  return Mark("bwd.context");
}

// On entry d_res_ = d loss / d x_[l+1]; on exit d loss / d x_[l].
Status DFlashDrafter::LayerBackward(int l) {
  if (config_.dflash2) return Layer2Backward(l);
  const TransformerConfig& t = config_.layers;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const DFlashLayerParams& w = params_.w.layers[l];
  const DFlashLayerParams& gw = params_.g.layers[l];
  const DFlashLayerActs& a = acts_[l];
  const TensorView ws_h = RmsWorkspace(rms_workspace_, t.hidden_size);
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;

  // MLP: x' = h1 + down(swiglu(gate_up(post_norm(h1)))). One pass rebuilds the SwiGLU
  // output over d_act_ and writes d_gu_; h1n is rebuilt in d_tmp2_ by the no-add form of
  // the forward's fused add + norm (both bitwise as in the forward). The post_norm backward
  // adds its dx straight into d_res_.
  RETURN_IF_ERROR(LinearInputGrad(g, d_res_, w.down_proj, d_act_, false, s));
  {
    const auto [gate, up] = kernels::SplitGateUp(a.gu);
    const auto [d_gate, d_up] = kernels::SplitGateUp(d_gu_);
    RETURN_IF_ERROR(kernels::SwiGluRecomputeBackward(d_act_, d_gate, d_up, d_act_, gate, up, s));
    RETURN_IF_ERROR(LinearWeightGrad(g, d_res_, d_act_, gw.down_proj, false, s));
  }
  RETURN_IF_ERROR(kernels::AddRmsNormForward(TensorView(), d_tmp2_, a.rstd2, a.h1, TensorView(),
                                             w.post_norm, eps, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d_gu_, d_tmp2_, gw.gate_up, false, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d_gu_, w.gate_up, d_tmp_, false, s));
  RETURN_IF_ERROR(kernels::RmsNormBackwardAdd(d_res_, gw.post_norm, d_tmp_, a.h1, w.post_norm,
                                              a.rstd2, ws_h, s));  // d h1
  RETURN_IF_ERROR(Mark("bwd.mlp", l));

  RETURN_IF_ERROR(AttentionBackward(l, d_res_));
  // xn rebuilt in d_tmp_ (no-add fused norm: bitwise the forward's xn).
  RETURN_IF_ERROR(kernels::AddRmsNormForward(TensorView(), d_tmp_, a.rstd1, x_[l], TensorView(),
                                             w.input_norm, eps, s));
  RETURN_IF_ERROR(QkvBackward(l, d_tmp_));
  // input_layernorm backward from the f32 d xn, its dx added into d_res_: d x_[l].
  RETURN_IF_ERROR(kernels::RmsNormBackwardAdd(d_res_, gw.input_norm, d_xn_f32_, x_[l],
                                              w.input_norm, a.rstd1, ws_h, s));
  RETURN_IF_ERROR(Mark("bwd.qkv", l));
  return ContextKvBackward(l);
}

// From d_out = d loss / d (attention output after o_proj) to d_q_, d_k_, d_v_ (before the
// norm and RoPE) and the context's d_kc_f32_ / d_vc_f32_; o_proj's and q/k_norm's grads.
Status DFlashDrafter::AttentionBackward(int l, const TensorView& d_out) {
  const TransformerConfig& t = config_.layers;
  const DFlashLayerParams& w = params_.w.layers[l];
  const DFlashLayerParams& gw = params_.g.layers[l];
  const DFlashLayerActs& a = acts_[l];
  const int64_t tt = tokens_;
  const TensorView ws_d = RmsWorkspace(rms_workspace_, t.head_dim);
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;
  RETURN_IF_ERROR(LinearInputGrad(g, d_out, w.o_proj, d_attn_, false, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d_out, a.attn, gw.o_proj, false, s));
  const TensorView kc = a.kc_s.Narrow(0, 0, tt), vc = a.vc.Narrow(0, 0, tt);
  const TensorView d_kc_f32 = d_kc_f32_.Narrow(0, 0, tt), d_vc_f32 = d_vc_f32_.Narrow(0, 0, tt);
  const kernels::DFlashAttentionInputs in{a.q_s, a.k_s, a.v, kc, vc, anchors_, doc_start_};
  const kernels::DFlashAttentionGrads grads{d_q_, d_k_, d_v_, d_kc_f32, d_vc_f32, attn_delta_};
  RETURN_IF_ERROR(DFlashAttentionBwd(in, DFlashLayerAttention(config_, l), a.attn, a.lse,
                                     d_attn_, grads, s));
  RETURN_IF_ERROR(Mark("bwd.attn", l));
  // Block q/k: RoPE and the per-head norm in one backward (in place).
  RETURN_IF_ERROR(kernels::RopeRmsNormBackward(d_q_, gw.q_norm, d_q_, a.q_pre, w.q_norm,
                                               a.q_rstd, block_pos_, t.rope_theta, ws_d, s));
  return kernels::RopeRmsNormBackward(d_k_, gw.k_norm, d_k_, a.k_pre, w.k_norm, a.k_rstd,
                                      block_pos_, t.rope_theta, ws_d, s);
}

// The q/k/v projections' weight grads from their input `in` (bf16 [R, H]) and d `in` into
// d_xn_f32_ (f32, overwritten).
Status DFlashDrafter::QkvBackward(int l, const TensorView& in) {
  const DFlashLayerParams& w = params_.w.layers[l];
  const DFlashLayerParams& gw = params_.g.layers[l];
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;
  RETURN_IF_ERROR(LinearWeightGrad(g, d_q_, in, gw.q_proj, false, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d_k_, in, gw.k_proj, false, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d_v_, in, gw.v_proj, false, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d_q_, w.q_proj, d_xn_f32_, false, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d_k_, w.k_proj, d_xn_f32_, true, s));
  return LinearInputGrad(g, d_v_, w.v_proj, d_xn_f32_, true, s);
}

// Context keys/values: the same k_proj/k_norm/v_proj, fed by ctx (no input_layernorm).
Status DFlashDrafter::ContextKvBackward(int l) {
  const TransformerConfig& t = config_.layers;
  const DFlashLayerParams& w = params_.w.layers[l];
  const DFlashLayerParams& gw = params_.g.layers[l];
  const DFlashLayerActs& a = acts_[l];
  const int64_t tt = tokens_;
  const TensorView ws_d = RmsWorkspace(rms_workspace_, t.head_dim);
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;
  const TensorView d_kc = d_kc_.Narrow(0, 0, tt), d_vc = d_vc_.Narrow(0, 0, tt),
                   ctx = ctx_.Narrow(0, 0, tt), d_ctx_f32 = d_ctx_f32_.Narrow(0, 0, tt);
  RETURN_IF_ERROR(kernels::Cast(d_kc, d_kc_f32_.Narrow(0, 0, tt), s));
  RETURN_IF_ERROR(kernels::Cast(d_vc, d_vc_f32_.Narrow(0, 0, tt), s));
  RETURN_IF_ERROR(kernels::RopeRmsNormBackward(
      d_kc, gw.k_norm, d_kc, a.kc_pre.Narrow(0, 0, tt), w.k_norm,
      a.kc_rstd.Narrow(0, 0, tt * t.num_key_value_heads), ctx_pos_.Narrow(0, 0, tt),
      t.rope_theta, ws_d, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d_kc, ctx, gw.k_proj, true, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d_vc, ctx, gw.v_proj, true, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d_kc, w.k_proj, d_ctx_f32, true, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d_vc, w.v_proj, d_ctx_f32, true, s));
  return Mark("bwd.ctx_kv", l);
}

}  // namespace tandem::models
