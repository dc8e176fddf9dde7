// The small ops of the Qwen3.5/3.6 hybrid layers (Gated DeltaNet and gated attention), each a
// CPU reference with fp32 math and one rounding to bf16 at the output.
//
// Operand convention ("row views"): 2-D bf16 views [rows, cols] with unit column stride and
// any row stride >= cols, so column blocks Narrow()ed out of one fused projection output
// (qkv | z | b | a, or query | gate per head) are read in place. Outputs follow the same
// convention. All operands on one device; outputs may not alias inputs unless stated.
//
//   CausalConv1dSiluForward   out[t, c] = silu(sum_j w[c, j] * x[t - (K-1) + j, c]), with
//                             x = 0 before the start of t's document (cu_seqlens): the
//                             conv state restarts at every document. x, out [T, C]; w [C, K].
//   GatedDeltaGates           beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias);
//                             a, b bf16 [T, hv]; A_log, dt_bias bf16 [hv]; g, beta f32 [T, hv].
//   GatedRmsNormForward       per head of width d: out = rmsnorm(x) * w * silu(z) (plain w);
//                             x, z, out [T, heads*d]; w [d].
//   ZeroCentredRmsNormForward out = x * rsqrt(mean(x^2) + eps) * (1 + w); x, out [rows, d];
//                             w [d] (Qwen3_5RMSNorm: input/post norms, final norm, q/k norms).
//   SigmoidGateForward        out = x * sigmoid(gate); x, gate, out [rows, cols]; out may
//                             alias x.
//
// Partial RoPE (the first rotary_dim of head_dim, rotate-half) is kernels/rope's
// RopeForward with RopeConfig::rotary_dim.
//
// The dispatchers run the CPU reference for host tensors and the CUDA version
// (hybrid_ops.cu: memory-bound kernels moving 16-byte vectors where the views allow) for
// device tensors. The gated norm and the sigmoid gate also come as FP8 producers writing the
// next projection's e4m3 input directly (hybrid_ops_fp8.h).
// Thread-safety: stateless.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

namespace cpu {
Status CausalConv1dSiluForward(TensorView out, TensorView x, TensorView w, TensorView cu_seqlens,
                               Stream s);
Status GatedDeltaGates(TensorView g, TensorView beta, TensorView a, TensorView b, TensorView a_log,
                       TensorView dt_bias, Stream s);
Status GatedRmsNormForward(TensorView out, TensorView x, TensorView z, TensorView w, float eps,
                           Stream s);
Status ZeroCentredRmsNormForward(TensorView out, TensorView x, TensorView w, float eps, Stream s);
Status SigmoidGateForward(TensorView out, TensorView x, TensorView gate, Stream s);
}  // namespace cpu

namespace cuda {
Status CausalConv1dSiluForward(TensorView out, TensorView x, TensorView w, TensorView cu_seqlens,
                               Stream s);
Status GatedDeltaGates(TensorView g, TensorView beta, TensorView a, TensorView b, TensorView a_log,
                       TensorView dt_bias, Stream s);
Status GatedRmsNormForward(TensorView out, TensorView x, TensorView z, TensorView w, float eps,
                           Stream s);
Status ZeroCentredRmsNormForward(TensorView out, TensorView x, TensorView w, float eps, Stream s);
Status SigmoidGateForward(TensorView out, TensorView x, TensorView gate, Stream s);
}  // namespace cuda

Status CausalConv1dSiluForward(TensorView out, TensorView x, TensorView w, TensorView cu_seqlens,
                               Stream s);
Status GatedDeltaGates(TensorView g, TensorView beta, TensorView a, TensorView b, TensorView a_log,
                       TensorView dt_bias, Stream s);
Status GatedRmsNormForward(TensorView out, TensorView x, TensorView z, TensorView w, float eps,
                           Stream s);
Status ZeroCentredRmsNormForward(TensorView out, TensorView x, TensorView w, float eps, Stream s);
Status SigmoidGateForward(TensorView out, TensorView x, TensorView gate, Stream s);

namespace internal {
// A 2-D view with unit column stride and row stride >= cols, of `dtype`, with `rows` rows
// (-1: any) and `cols` columns (-1: any). InvalidArgument naming `op` and `what` otherwise.
Status CheckRowView(const char* op, const char* what, const TensorView& t, DType dtype,
                    int64_t rows, int64_t cols);
// Each op's argument checks, shared by the CPU and CUDA versions (the conv's also returns K).
Status CheckConv(const TensorView& out, const TensorView& x, const TensorView& w,
                 const TensorView& cu_seqlens, int64_t* k);
Status CheckGates(const TensorView& g, const TensorView& beta, const TensorView& a,
                  const TensorView& b, const TensorView& a_log, const TensorView& dt_bias);
Status CheckGatedNorm(const TensorView& out, const TensorView& x, const TensorView& z,
                      const TensorView& w);
Status CheckZeroCentredNorm(const TensorView& out, const TensorView& x, const TensorView& w);
Status CheckSigmoidGate(const TensorView& out, const TensorView& x, const TensorView& gate);
// cu_seqlens: a contiguous i32 [docs+1], docs >= 1 (its values are not read).
Status CheckCuSeqlensShape(const char* op, const TensorView& cu_seqlens);
// cu_seqlens: i32 [docs+1] on the host, 0 = cu[0] <= cu[1] <= ... <= cu[docs] = tokens.
// Reads the values, so only for host tensors (the CPU references).
Status CheckHostCuSeqlens(const char* op, const TensorView& cu_seqlens, int64_t tokens);
}  // namespace internal

}  // namespace tandem::kernels
