// Decoding steps of Gated DeltaNet (Qwen3.5/3.6 hybrids): the causal conv and the gated delta
// rule over a few new tokens of ONE sequence, continuing from a saved state instead of
// restarting at zero. The hybrid target's decode cache (models/qwen3_5/qwen3_5_cache.h) calls
// them to prefill, to verify a block of drafts, and to replay the accepted prefix of a block
// when drafts are rejected.
//
//   CausalConv1dSiluStep  cat = [state; x] (K-1 saved raw inputs, then the n new ones):
//                         out[i, c] = silu(sum_j w[c, j] * cat[i + j, c]), j = 0 .. K-1,
//                         summed in that order in fp32 (the order of CausalConv1dSiluForward,
//                         whose zero padding before a document is a zero state here).
//                         `history` receives the last R rows of cat (K-1 <= R <= K-1+n): with
//                         R = K-1+n, rows [m, m+K-1) are the conv state after the first m new
//                         tokens, so rolling the conv back costs nothing.
//     x, out: bf16 [n, C] row views; state: bf16 [K-1, C] contiguous; w: bf16 [C, K];
//     history: bf16 [R, C] contiguous, not overlapping `state`.
//
//   GatedDeltaRuleStep    the recurrence of gated_delta_rule.h for n tokens from state_in:
//                         per value head, S <- S exp(g_t); delta = beta_t (v_t - S^T k_t);
//                         S <- S + k_t delta^T; o_t = S^T q_t; then state_out = S.
//     q, k, v, g, beta as GatedDeltaRuleArgs (n rows; cu_seqlens is not read);
//     out: bf16 / f32 [n, hv*dv] row view, or empty to update the state only (the replay);
//     state_in, state_out: f32 [hv, dk, dv] contiguous (S[vh][i][j], key index i), may be the
//     same buffer.
//   The state is stored in fp32 between tokens on both versions: the CPU twin does each
//   token's math in float64 (as the reference) and rounds the state to fp32 after every
//   token, so the result for a token does not depend on how the tokens were split into
//   calls (prefill + verify + crop + replay reproduces a one-shot prefill bitwise). It differs
//   from the float64 GatedDeltaRuleForward (which never rounds the state) by fp32 rounding;
//   the CUDA version does fp32 math, one block per value head, thread j holding column j of
//   S in registers (head dims <= 128).
//
// Thread-safety: stateless; CUDA versions are asynchronous on `s`.
#pragma once

#include "kernels/core/tensor.h"
#include "kernels/linear_attention/gated_delta_rule.h"

namespace tandem::kernels {

struct GatedDeltaRuleStepArgs {
  GatedDeltaRuleArgs rule;  // q, k, v, g, beta, out (may be empty), heads, dims, l2norm, scale
  TensorView state_in;      // f32 [hv, dk, dv]
  TensorView state_out;     // f32 [hv, dk, dv]; may equal state_in
};

namespace cpu {
Status CausalConv1dSiluStep(TensorView out, TensorView history, TensorView x, TensorView state,
                            TensorView w, Stream s);
Status GatedDeltaRuleStep(const GatedDeltaRuleStepArgs& args, Stream s);
}  // namespace cpu
namespace cuda {
Status CausalConv1dSiluStep(TensorView out, TensorView history, TensorView x, TensorView state,
                            TensorView w, Stream s);
Status GatedDeltaRuleStep(const GatedDeltaRuleStepArgs& args, Stream s);
}  // namespace cuda

// Dispatch on the device of the tensors (CPU reference or CUDA).
Status CausalConv1dSiluStep(TensorView out, TensorView history, TensorView x, TensorView state,
                            TensorView w, Stream s);
Status GatedDeltaRuleStep(const GatedDeltaRuleStepArgs& args, Stream s);

namespace internal {
// Shapes, dtypes and devices shared by both versions; fill n and K.
Status CheckConvStep(const TensorView& out, const TensorView& history, const TensorView& x,
                     const TensorView& state, const TensorView& w, int64_t* n, int64_t* k);
Status CheckGatedDeltaRuleStep(const GatedDeltaRuleStepArgs& args, int64_t* n);
}  // namespace internal

}  // namespace tandem::kernels
