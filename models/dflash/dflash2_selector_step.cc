// The DFlash2 drafter's candidate selector step (docs/dflash2.md; kernels/dflash2/selector.h):
//   C[t], U[t] = top-k ids and values of the transformed logits (the LM head + CE call)
//   P = h Wh^T (hidden_projection);  S[t, j] = U[t, j] + sum_q A[prev_t, q] P[t, q] B[C[t, j], q]
//   L_sel = strict top-k CE over the candidates (covered rows, weighted as the DFlash loss)
// on the R' loss rows the LM head runs on (lm_rows_), prev_t teacher-forced (lm_prev_).
// alpha * dL_sel flows into A, B (SelectorScoresBackward), Wh and h (GEMMs) and, through
// the unary logits, the frozen LM head and the transform into h (CandidateHeadBackward).
#include "kernels/dflash2/selector.h"
#include "kernels/elementwise/row_gather.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_drafter_internal.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

Status DFlashDrafter::SelectorForward() {
  kernels::Stream s = stream_;
  const int64_t n = lm_rows_count_;
  if (n == 0) {  // no loss row: loss 0, nothing covered
    RETURN_IF_ERROR(kernels::FillZero(sel_loss_, s));
    return kernels::FillZero(sel_stats_, s);
  }
  const DFlashParamViews& w = params_.w;
  const TensorView proj = sel_proj_.Narrow(0, 0, n), ids = sel_ids_.Narrow(0, 0, n),
                   scores = sel_scores_.Narrow(0, 0, n);
  RETURN_IF_ERROR(LinearForward(gemm_.get(), lm_hidden_.Narrow(0, 0, n), w.sel_proj, proj, s));
  RETURN_IF_ERROR(kernels::dflash2::SelectorScoresForward(scores, proj, w.sel_pred, w.sel_succ,
                                                          lm_prev_.Narrow(0, 0, n), ids,
                                                          sel_vals_.Narrow(0, 0, n), s));
  return kernels::dflash2::SelectorLoss(sel_loss_, sel_stats_, sel_dscores_.Narrow(0, 0, n),
                                        scores, ids, lm_targets_.Narrow(0, 0, n),
                                        lm_weights_.Narrow(0, 0, n),
                                        options_.selector_loss_weight, s);
}

Status DFlashDrafter::SelectorBackward() {
  kernels::Stream s = stream_;
  const DFlashParamViews& w = params_.w;
  const DFlashParamViews& gw = params_.g;
  const int64_t n = lm_rows_count_;
  // The codebooks' grads accumulate (scattered by token); the other matrices' are written
  // with beta = 0, but with no loss row nothing writes them.
  RETURN_IF_ERROR(kernels::FillZero(gw.sel_pred, s));
  RETURN_IF_ERROR(kernels::FillZero(gw.sel_succ, s));
  if (n == 0) return kernels::FillZero(gw.sel_proj, s);  // d_tmp_ is 0 from LmHeadLoss
  const TensorView hidden = lm_hidden_.Narrow(0, 0, n), dhidden = lm_dhidden_.Narrow(0, 0, n),
                   dproj = sel_dproj_.Narrow(0, 0, n), dscores = sel_dscores_.Narrow(0, 0, n),
                   ids = sel_ids_.Narrow(0, 0, n);
  RETURN_IF_ERROR(kernels::dflash2::SelectorScoresBackward(
      dproj, gw.sel_pred, gw.sel_succ, dscores, sel_proj_.Narrow(0, 0, n), w.sel_pred,
      w.sel_succ, lm_prev_.Narrow(0, 0, n), ids, s));
  RETURN_IF_ERROR(LinearWeightGrad(gemm_.get(), dproj, hidden, gw.sel_proj, false, s));
  RETURN_IF_ERROR(LinearInputGrad(gemm_.get(), dproj, w.sel_proj, dhidden, true, s));
  const DFlash2Extension& e = *config_.dflash2;
  RETURN_IF_ERROR(kernels::dflash2::CandidateHeadBackward(
      dhidden, dscores, sel_vals_.Narrow(0, 0, n), ids, head_lm_,
      static_cast<float>(e.output_multiplier),
      static_cast<float>(e.final_logit_softcapping.value_or(0.0)), s));
  RETURN_IF_ERROR(kernels::RowGather(d_tmp_, lm_slot_, dhidden, s));
  return Mark("bwd.selector");
}

}  // namespace tandem::models
