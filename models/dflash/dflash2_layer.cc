// The DFlash2 drafter layer (docs/dflash2.md): a DFlash layer with a grouped dynamic causal
// convolution around attention and around the MLP (kernels/dflash2/dynamic_conv.h):
//   xn = input_layernorm(x);  da = xn Wa^T  [R, 2*K*G]
//   y  = Conv(xn; base_a[0], da[side 0]);  o = o_proj(attention(q/k/v from y, context))
//   h1 = x + Conv(o; base_a[1], da[side 1])
//   h1n = post_attention_layernorm(h1);  dm = h1n Wm^T
//   y2 = Conv(h1n; base_m[0], dm[side 0]);  m = down(silu(gate(y2)) * up(y2))
//   x' = h1 + Conv(m; base_m[1], dm[side 1])
// The context keys and values are DFlash's (no convolution, no input norm). The residual
// adds are fused into the finish convolutions (accumulate). Saved per layer: da, y, o, dm,
// y2, m (DFlashLayerActs); xn and h1n are rebuilt from the saved rstd in the backward.
#include <algorithm>
#include <cmath>

#include "kernels/dflash2/dynamic_conv.h"
#include "kernels/dflash2/row_topk.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fused.h"
#include "kernels/norm/fused_norm.h"
#include "kernels/norm/rmsnorm.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_drafter_internal.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

// DFlash2's limits: what the kernels take (kernels/dflash2/dynamic_conv.h, row_topk.h).
Status CheckDFlash2Supported(const DFlashConfig& c) {
  if (!c.dflash2) return Status::Ok();
  const DFlash2Extension& e = *c.dflash2;
  if (e.conv_kernel_size < 1 || e.conv_kernel_size > kernels::dflash2::kDynamicConvMaxTaps ||
      e.conv_kernel_size > c.block_size)
    return InvalidArgumentError("DFlash2 drafter: conv_kernel_size {} not in [1, {}]",
                                e.conv_kernel_size,
                                std::min(kernels::dflash2::kDynamicConvMaxTaps, c.block_size));
  if (e.conv_group_size < 1 || c.layers.hidden_size % e.conv_group_size != 0)
    return InvalidArgumentError("DFlash2 drafter: conv_group_size {} does not divide "
                                "hidden_size {}", e.conv_group_size, c.layers.hidden_size);
  if (e.selector_top_k < 1 || e.selector_top_k > kernels::dflash2::kLogitsTopKMax ||
      e.selector_top_k > c.layers.vocab_size)
    return InvalidArgumentError("DFlash2 drafter: selector_top_k {} not in [1, {}]",
                                e.selector_top_k, kernels::dflash2::kLogitsTopKMax);
  if (e.selector_rank < 1)
    return InvalidArgumentError("DFlash2 drafter: selector_rank {} < 1", e.selector_rank);
  if (!std::isfinite(e.input_embedding_scale) || e.input_embedding_scale <= 0)
    return InvalidArgumentError("DFlash2 drafter: input_embedding_scale {} is not a finite "
                                "number > 0", e.input_embedding_scale);
  return Status::Ok();
}

namespace {

// The shapes of one layer's convolutions.
struct ConvDims {
  int64_t taps, group, kg, hidden, block;
  explicit ConvDims(const DFlashConfig& c)
      : taps(c.dflash2->conv_kernel_size),
        group(c.dflash2->conv_group_size),
        kg(c.dflash2->conv_kernel_size * c.dflash2->conv_groups(c.layers.hidden_size)),
        hidden(c.layers.hidden_size),
        block(c.block_size) {}
  // Side `side` of the dynamic weights [R, 2*K*G]: [R, K*G] with the row stride 2*K*G.
  TensorView Dyn(const TensorView& d, int side) const { return d.Narrow(1, side * kg, kg); }
  // Side `side` of base_kernel [2, K, H] (weights bf16 or grads f32): [K, H].
  TensorView Base(const TensorView& b, int side) const {
    return b.Narrow(0, side, 1).Reshape(Shape{taps, hidden});
  }
};

}  // namespace

void DFlashDrafter::Carve2(WorkspaceCarver& c) {
  const DFlash2Extension& e = *config_.dflash2;
  const int64_t r = rows(), h = config_.layers.hidden_size, k = e.selector_top_k,
                rank = e.selector_rank;
  const int64_t kg2 = 2 * e.conv_kernel_size * e.conv_groups(h);
  for (DFlashLayerActs& a : acts_) {
    a.dyn_attn = c.Take(DType::kBF16, Shape{r, kg2});
    a.y_attn = c.Take(DType::kBF16, Shape{r, h});
    a.o_attn = c.Take(DType::kBF16, Shape{r, h});
    a.dyn_mlp = c.Take(DType::kBF16, Shape{r, kg2});
    a.y_mlp = c.Take(DType::kBF16, Shape{r, h});
    a.m_out = c.Take(DType::kBF16, Shape{r, h});
  }
  d2_dyn_ = c.Take(DType::kBF16, Shape{r, kg2});
  d2_a_ = c.Take(DType::kBF16, Shape{r, h});
  d2_b_ = c.Take(DType::kBF16, Shape{r, h});
  d2_f32_ = c.Take(DType::kF32, Shape{r, h});
  const int64_t conv_ws =
      kernels::dflash2::DynamicConvBackwardWorkspaceBytes(r, h, e.conv_kernel_size);
  conv_ws_ = device_.is_cpu() ? TensorView()
                              : c.Take(DType::kU8, Shape{std::max<int64_t>(conv_ws, 1)});
  sel_ids_ = c.Take(DType::kI32, Shape{r, k});
  sel_vals_ = c.Take(DType::kF32, Shape{r, k});
  sel_proj_ = c.Take(DType::kF32, Shape{r, rank});
  sel_scores_ = c.Take(DType::kF32, Shape{r, k});
  sel_dscores_ = c.Take(DType::kF32, Shape{r, k});
  sel_dproj_ = c.Take(DType::kBF16, Shape{r, rank});
  sel_loss_ = c.Take(DType::kF32, Shape{1});
  sel_stats_ = c.Take(DType::kI32, Shape{2});
}

Status DFlashDrafter::Layer2Forward(int l) {
  const TransformerConfig& t = config_.layers;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const DFlashLayerParams& w = params_.w.layers[l];
  DFlashLayerActs& a = acts_[l];
  const ConvDims cd(config_);
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;
  RETURN_IF_ERROR(WaitUpdated(1 + l));
  // Attention branch: xn (d_tmp_, with a.rstd1) -> prepare conv -> attention -> finish conv.
  RETURN_IF_ERROR(LinearForward(g, d_tmp_, w.attn_conv_proj, a.dyn_attn, s));
  RETURN_IF_ERROR(kernels::dflash2::DynamicConvForward(a.y_attn, d_tmp_, cd.Base(w.attn_conv_base, 0),
                                                       cd.Dyn(a.dyn_attn, 0), cd.group, cd.block,
                                                       false, s));
  RETURN_IF_ERROR(AttentionForward(l, a.y_attn, a.o_attn));
  RETURN_IF_ERROR(kernels::Copy(a.h1, x_[l], s));
  RETURN_IF_ERROR(kernels::dflash2::DynamicConvForward(a.h1, a.o_attn, cd.Base(w.attn_conv_base, 1),
                                                       cd.Dyn(a.dyn_attn, 1), cd.group, cd.block,
                                                       true, s));
  // MLP branch: h1n (d_tmp2_) -> prepare conv -> SwiGLU MLP -> finish conv.
  RETURN_IF_ERROR(kernels::AddRmsNormForward(TensorView(), d_tmp2_, a.rstd2, a.h1, TensorView(),
                                             w.post_norm, eps, s));
  RETURN_IF_ERROR(LinearForward(g, d_tmp2_, w.mlp_conv_proj, a.dyn_mlp, s));
  RETURN_IF_ERROR(kernels::dflash2::DynamicConvForward(a.y_mlp, d_tmp2_, cd.Base(w.mlp_conv_base, 0),
                                                       cd.Dyn(a.dyn_mlp, 0), cd.group, cd.block,
                                                       false, s));
  RETURN_IF_ERROR(LinearForward(g, a.y_mlp, w.gate_up, a.gu, s));
  const auto [gate, up] = kernels::SplitGateUp(a.gu);
  RETURN_IF_ERROR(kernels::SwiGluForward(act_s_, gate, up, s));
  RETURN_IF_ERROR(LinearForward(g, act_s_, w.down_proj, a.m_out, s));
  RETURN_IF_ERROR(kernels::Copy(x_[l + 1], a.h1, s));
  RETURN_IF_ERROR(kernels::dflash2::DynamicConvForward(x_[l + 1], a.m_out, cd.Base(w.mlp_conv_base, 1),
                                                       cd.Dyn(a.dyn_mlp, 1), cd.group, cd.block,
                                                       true, s));
  // The next layer's xn (d_tmp_) or the final hidden.
  const bool last = l + 1 == t.num_hidden_layers;
  RETURN_IF_ERROR(kernels::AddRmsNormForward(
      TensorView(), last ? final_hidden_ : d_tmp_, last ? final_rstd_ : acts_[l + 1].rstd1,
      x_[l + 1], TensorView(), last ? params_.w.norm : params_.w.layers[l + 1].input_norm, eps,
      s));
  return Mark("fwd.mlp", l);
}

// On entry d_res_ = d loss / d x_[l+1]; on exit d loss / d x_[l]. Each branch: the finish
// conv's backward (dx into d2_a_, side 1 of d dyn into d2_dyn_), the branch, the prepare
// conv's backward (side 0), then the projection's grads and d u = d_conv + d dyn . W in f32
// into the norm's backward, which adds into d_res_.
Status DFlashDrafter::Layer2Backward(int l) {
  const TransformerConfig& t = config_.layers;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const DFlashLayerParams& w = params_.w.layers[l];
  const DFlashLayerParams& gw = params_.g.layers[l];
  const DFlashLayerActs& a = acts_[l];
  const ConvDims cd(config_);
  const TensorView ws_h = RmsWorkspace(rms_workspace_, t.hidden_size);
  kernels::GemmContext* g = gemm_.get();
  kernels::Stream s = stream_;
  namespace d2 = kernels::dflash2;

  // MLP finish conv: d m (d2_a_), d base_m[1], d dm[side 1].
  RETURN_IF_ERROR(d2::DynamicConvBackward(d2_a_, cd.Base(gw.mlp_conv_base, 1),
                                          cd.Dyn(d2_dyn_, 1), d_res_, a.m_out,
                                          cd.Base(w.mlp_conv_base, 1), cd.Dyn(a.dyn_mlp, 1),
                                          cd.group, cd.block, conv_ws_, s));
  // down_proj and the SwiGLU (its output rebuilt over d_act_), gate_up from y2.
  RETURN_IF_ERROR(LinearInputGrad(g, d2_a_, w.down_proj, d_act_, false, s));
  {
    const auto [gate, up] = kernels::SplitGateUp(a.gu);
    const auto [d_gate, d_up] = kernels::SplitGateUp(d_gu_);
    RETURN_IF_ERROR(kernels::SwiGluRecomputeBackward(d_act_, d_gate, d_up, d_act_, gate, up, s));
    RETURN_IF_ERROR(LinearWeightGrad(g, d2_a_, d_act_, gw.down_proj, false, s));
  }
  RETURN_IF_ERROR(LinearWeightGrad(g, d_gu_, a.y_mlp, gw.gate_up, false, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d_gu_, w.gate_up, d2_b_, false, s));  // d y2
  // MLP prepare conv from h1n (rebuilt in d_tmp_), then the projection.
  RETURN_IF_ERROR(kernels::AddRmsNormForward(TensorView(), d_tmp_, a.rstd2, a.h1, TensorView(),
                                             w.post_norm, eps, s));
  RETURN_IF_ERROR(d2::DynamicConvBackward(d2_a_, cd.Base(gw.mlp_conv_base, 0),
                                          cd.Dyn(d2_dyn_, 0), d2_b_, d_tmp_,
                                          cd.Base(w.mlp_conv_base, 0), cd.Dyn(a.dyn_mlp, 0),
                                          cd.group, cd.block, conv_ws_, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d2_dyn_, d_tmp_, gw.mlp_conv_proj, false, s));
  RETURN_IF_ERROR(kernels::Cast(d2_f32_, d2_a_, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d2_dyn_, w.mlp_conv_proj, d2_f32_, true, s));
  RETURN_IF_ERROR(kernels::RmsNormBackwardAdd(d_res_, gw.post_norm, d2_f32_, a.h1, w.post_norm,
                                              a.rstd2, ws_h, s));  // d h1
  RETURN_IF_ERROR(Mark("bwd.mlp", l));

  // Attention finish conv: d o (d2_a_), then o_proj, the attention, q/k/v from y.
  RETURN_IF_ERROR(d2::DynamicConvBackward(d2_a_, cd.Base(gw.attn_conv_base, 1),
                                          cd.Dyn(d2_dyn_, 1), d_res_, a.o_attn,
                                          cd.Base(w.attn_conv_base, 1), cd.Dyn(a.dyn_attn, 1),
                                          cd.group, cd.block, conv_ws_, s));
  RETURN_IF_ERROR(AttentionBackward(l, d2_a_));
  RETURN_IF_ERROR(QkvBackward(l, a.y_attn));  // d y in d_xn_f32_
  RETURN_IF_ERROR(kernels::Cast(d2_b_, d_xn_f32_, s));
  // Attention prepare conv from xn (rebuilt in d_tmp_), then the projection.
  RETURN_IF_ERROR(kernels::AddRmsNormForward(TensorView(), d_tmp_, a.rstd1, x_[l], TensorView(),
                                             w.input_norm, eps, s));
  RETURN_IF_ERROR(d2::DynamicConvBackward(d2_a_, cd.Base(gw.attn_conv_base, 0),
                                          cd.Dyn(d2_dyn_, 0), d2_b_, d_tmp_,
                                          cd.Base(w.attn_conv_base, 0), cd.Dyn(a.dyn_attn, 0),
                                          cd.group, cd.block, conv_ws_, s));
  RETURN_IF_ERROR(LinearWeightGrad(g, d2_dyn_, d_tmp_, gw.attn_conv_proj, false, s));
  RETURN_IF_ERROR(kernels::Cast(d_xn_f32_, d2_a_, s));
  RETURN_IF_ERROR(LinearInputGrad(g, d2_dyn_, w.attn_conv_proj, d_xn_f32_, true, s));
  RETURN_IF_ERROR(kernels::RmsNormBackwardAdd(d_res_, gw.input_norm, d_xn_f32_, x_[l],
                                              w.input_norm, a.rstd1, ws_h, s));
  RETURN_IF_ERROR(Mark("bwd.qkv", l));
  return ContextKvBackward(l);
}


}  // namespace tandem::models
