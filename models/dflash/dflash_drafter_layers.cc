// DFlash drafter: one decoder layer's forward (attention with the context's keys and values,
// the MLP; a DFlash2 layer's convolutions are in dflash2_layer.cc) and the LM head loss over
// the rows with loss weight (the transformed logits and their top-k for a DFlash2 drafter).
// Part of DFlashDrafter (dflash_drafter.h); thread-safety as the drafter's.
#include "kernels/core/stream.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/row_gather.h"
#include "kernels/loss/lm_head_ce.h"
#include "kernels/loss/lm_head_ce_fp8.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/norm/fused_norm.h"
#include "kernels/norm/rmsnorm.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_drafter_internal.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

Status DFlashDrafter::LmHeadLoss(bool want_grad) {
  kernels::Stream s = stream_;
  const int64_t n = lm_rows_count_;
  if (n == 0) {  // no row carries loss weight: loss 0 and a zero gradient, no empty GEMMs
    RETURN_IF_ERROR(kernels::FillZero(loss_, s));
    RETURN_IF_ERROR(kernels::FillZero(correct_, s));
    if (config_.dflash2) RETURN_IF_ERROR(SelectorForward());
    return want_grad ? kernels::FillZero(d_tmp_, s) : Status::Ok();
  }
  // Same weighted sum over the same rows and the same denominator as over all R rows (the
  // skipped rows have weight 0); d hidden and correctness go back to their rows, skipped
  // rows 0 (what the CE gives a weight-0 row).
  const TensorView hidden = lm_hidden_.Narrow(0, 0, n), dhidden = lm_dhidden_.Narrow(0, 0, n),
                   correct = lm_correct_.Narrow(0, 0, n);
  RETURN_IF_ERROR(kernels::RowGather(hidden, lm_rows_.Narrow(0, 0, n), final_hidden_, s));
  kernels::LmHeadCeOutputs out;
  out.loss = loss_;
  out.correct = correct;
  if (want_grad) out.dhidden = dhidden;
  kernels::LmHeadCeTransform transform;
  if (const std::optional<DFlash2Extension>& e = config_.dflash2) {
    // DFlash2: the transformed logits, and their top-k for the selector.
    transform.multiplier = static_cast<float>(e->output_multiplier);
    transform.softcap = static_cast<float>(e->final_logit_softcapping.value_or(0.0));
    out.topk_ids = sel_ids_.Narrow(0, 0, n);
    out.topk_values = sel_vals_.Narrow(0, 0, n);
  }
  if (options_.lm_head_fp8) {
    RETURN_IF_ERROR(kernels::LmHeadCrossEntropyFp8(gemm_.get(), hidden, *head_lm_fp8_,
                                                   lm_targets_.Narrow(0, 0, n),
                                                   lm_weights_.Narrow(0, 0, n), out,
                                                   ce_workspace_, options_.ce_chunk_rows, s,
                                                   transform));
  } else {
    RETURN_IF_ERROR(kernels::LmHeadCrossEntropy(gemm_.get(), hidden, head_lm_,
                                                lm_targets_.Narrow(0, 0, n),
                                                lm_weights_.Narrow(0, 0, n), out, ce_workspace_,
                                                options_.ce_chunk_rows, s, transform));
  }
  RETURN_IF_ERROR(kernels::RowGather(correct_, lm_slot_, correct, s));
  // DFlash2 adds the selector's d hidden before scattering (SelectorBackward).
  if (config_.dflash2) return SelectorForward();
  return want_grad ? kernels::RowGather(d_tmp_, lm_slot_, dhidden, s) : Status::Ok();
}

kernels::DFlashAttentionConfig DFlashLayerAttention(const DFlashConfig& c, int l) {
  kernels::DFlashAttentionConfig cfg;
  if (c.layers.layer_types[l] == LayerType::kSlidingAttention)
    cfg.window = static_cast<int>(*c.layers.sliding_window);
  cfg.causal_in_block = DFlashLayerCausal(c, l);
  return cfg;
}

Status DFlashDrafter::LayerForward(int l) {
  if (config_.dflash2) return Layer2Forward(l);
  const TransformerConfig& t = config_.layers;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const DFlashLayerParams& w = params_.w.layers[l];
  DFlashLayerActs& a = acts_[l];
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;
  RETURN_IF_ERROR(WaitUpdated(1 + l));  // this layer's matrices (overlapped optimizer)
  // xn = input_layernorm(x_[l]) is already in d_tmp_, with a.rstd1: written by the previous
  // layer's fused residual add + norm, or by Forward.
  RETURN_IF_ERROR(AttentionForward(l, d_tmp_, a.h1));
  // Residual, MLP (h1n lives in d_tmp2_, the SwiGLU output in act_s_).
  RETURN_IF_ERROR(
      kernels::AddRmsNormForward(a.h1, d_tmp2_, a.rstd2, a.h1, x_[l], w.post_norm, eps, s));
  RETURN_IF_ERROR(LinearForward(g, d_tmp2_, w.gate_up, a.gu, s));
  const auto [gate, up] = kernels::SplitGateUp(a.gu);
  RETURN_IF_ERROR(kernels::SwiGluForward(act_s_, gate, up, s));
  RETURN_IF_ERROR(LinearForward(g, act_s_, w.down_proj, x_[l + 1], s));
  // x_[l+1] = down + h1, and its norm: the next layer's xn (d_tmp_) or the final hidden.
  const bool last = l + 1 == t.num_hidden_layers;
  RETURN_IF_ERROR(kernels::AddRmsNormForward(
      x_[l + 1], last ? final_hidden_ : d_tmp_, last ? final_rstd_ : acts_[l + 1].rstd1,
      x_[l + 1], a.h1, last ? params_.w.norm : params_.w.layers[l + 1].input_norm, eps, s));
  return Mark("fwd.mlp", l);
}

Status DFlashDrafter::AttentionForward(int l, const TensorView& in, const TensorView& out) {
  const DFlashLayerParams& w = params_.w.layers[l];
  DFlashLayerActs& a = acts_[l];
  const int64_t tt = tokens_;
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;
  // Block queries, keys and values from `in`.
  RETURN_IF_ERROR(LinearForward(g, in, w.q_proj, a.q_pre, s));
  RETURN_IF_ERROR(LinearForward(g, in, w.k_proj, a.k_pre, s));
  RETURN_IF_ERROR(LinearForward(g, in, w.v_proj, a.v, s));
  // Context keys and values through this layer's k/v projections (no input_layernorm).
  const TensorView ctx = ctx_.Narrow(0, 0, tt), kc_pre = a.kc_pre.Narrow(0, 0, tt),
                   vc = a.vc.Narrow(0, 0, tt);
  RETURN_IF_ERROR(LinearForward(g, ctx, w.k_proj, kc_pre, s));
  RETURN_IF_ERROR(LinearForward(g, ctx, w.v_proj, vc, s));
  RETURN_IF_ERROR(NormRopeQk(l));
  RETURN_IF_ERROR(Mark("fwd.qkv", l));
  const kernels::DFlashAttentionInputs attn_in{a.q_s, a.k_s, a.v, a.kc_s.Narrow(0, 0, tt), vc,
                                               anchors_, doc_start_};
  RETURN_IF_ERROR(
      DFlashAttentionFwd(attn_in, DFlashLayerAttention(config_, l), a.attn, a.lse, s));
  RETURN_IF_ERROR(Mark("fwd.attn", l));
  return LinearForward(g, a.attn, w.o_proj, out, s);
}

Status DFlashDrafter::NormRopeQk(int l) {
  const TransformerConfig& t = config_.layers;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const DFlashLayerParams& w = params_.w.layers[l];
  const DFlashLayerActs& a = acts_[l];
  const int64_t tt = tokens_;
  kernels::Stream s = stream_;
  RETURN_IF_ERROR(kernels::RmsNormRopeForward(a.q_s, a.q_rstd, a.q_pre, w.q_norm, block_pos_,
                                              eps, t.rope_theta, s));
  RETURN_IF_ERROR(kernels::RmsNormRopeForward(a.k_s, a.k_rstd, a.k_pre, w.k_norm, block_pos_,
                                              eps, t.rope_theta, s));
  return kernels::RmsNormRopeForward(a.kc_s.Narrow(0, 0, tt),
                                     a.kc_rstd.Narrow(0, 0, tt * t.num_key_value_heads),
                                     a.kc_pre.Narrow(0, 0, tt), w.k_norm,
                                     ctx_pos_.Narrow(0, 0, tt), eps, t.rope_theta, s);
}

}  // namespace tandem::models
