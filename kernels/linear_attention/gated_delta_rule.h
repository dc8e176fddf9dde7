// The gated delta rule (Gated DeltaNet's token mixer, Qwen3.5/3.6 hybrids) over a packed
// batch of documents, forward only.
//
// Per value head j (key head j / (hv / hk): each key head serves hv/hk consecutive value
// heads), with q and k L2-normalised (x * rsqrt(sum x^2 + 1e-6)) when `l2norm_qk` and q
// scaled by `scale` (0 means dk^-1/2), and a state S [dk, dv] that starts at zero in every
// document (cu_seqlens):
//   S <- S * exp(g_t)
//   delta = beta_t * (v_t - S^T k_t)
//   S <- S + k_t delta^T
//   o_t = S^T q_t
//
//   q, k: bf16 [T, hk*dk]   v: bf16 [T, hv*dv]   (row views: unit column stride, any row
//                                                  stride, so the conv output is read in place)
//   g, beta: f32 [T, hv]    g is the log decay (<= 0)
//   cu_seqlens: i32 [docs+1]
//   out: bf16 or f32 [T, hv*dv] (row view)
//
// The CPU reference is the recurrent form above in float64 (one rounding at the output). The
// CUDA version (gated_delta_rule.cu) is the same recurrence in fp32, one block per (value
// head, document), for head dims up to 128. The fast path for head dims 128 / 128 is the
// chunked tensor-core kernel (gated_delta_rule_chunked.h).
// Thread-safety: stateless.
#pragma once

#include <cstdint>

#include "kernels/core/tensor.h"

namespace tandem::kernels {

struct GatedDeltaRuleArgs {
  TensorView q, k, v, g, beta, cu_seqlens, out;
  int64_t key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0;
  bool l2norm_qk = true;
  float scale = 0.f;  // 0: key_dim^-1/2
};

namespace cpu {
Status GatedDeltaRuleForward(const GatedDeltaRuleArgs& args, Stream s);
}  // namespace cpu
namespace cuda {
Status GatedDeltaRuleForward(const GatedDeltaRuleArgs& args, Stream s);
}  // namespace cuda

Status GatedDeltaRuleForward(const GatedDeltaRuleArgs& args, Stream s);

namespace internal {
// Shapes, dtypes and head counts shared by every version; fills the token count.
Status CheckGatedDeltaRule(const GatedDeltaRuleArgs& args, int64_t* tokens);
}  // namespace internal

}  // namespace tandem::kernels
