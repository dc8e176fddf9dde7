// FP8 producers of the hybrid layers: the gated RMSNorm (Gated DeltaNet) and the sigmoid
// output gate (gated attention) written straight as block-scaled e4m3 activations (1x128
// groups, kernels/gemm/fp8.h), the inputs of the out / o projections of an FP8 target, so
// their bf16 outputs never go to memory.
//
//   GatedRmsNormFp8Forward  out = quantize(GatedRmsNormForward(x, z, w)); x, z bf16
//                           [T, heads*d] row views, w bf16 [d]; out [Fp8PaddedRows(T),
//                           heads*d].
//   SigmoidGateFp8Forward   out = quantize(SigmoidGateForward(x, gate) seen as [T, heads*d]);
//                           x, gate bf16 [T*heads, d] row views (one row per token and head,
//                           e.g. the attention output and the gate half of each head's
//                           query | gate block), out [Fp8PaddedRows(T), heads*d]: token r's
//                           row is the rows r*heads .. r*heads+heads-1 side by side.
//
// Numerics: the bf16 value the op of hybrid_ops.h stores, then quantized exactly as
// QuantizeFp8Activation does (scale = amax / 448 per row per 128 columns); padding rows
// T..Fp8PaddedRows(T)-1 get zero codes and scale 1. The CPU versions are that composition
// (the CPU reference, then cpu::QuantizeFp8Activation), so a CPU FP8 forward is bitwise what
// it was with the two ops. The CUDA versions quantize in registers (hybrid_ops_fp8.cu).
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"
#include "kernels/gemm/fp8.h"

namespace tandem::kernels {

namespace cpu {
Status GatedRmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView z,
                              TensorView w, float eps, Stream s);
Status SigmoidGateFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView gate,
                             Stream s);
}  // namespace cpu

namespace cuda {
Status GatedRmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView z,
                              TensorView w, float eps, Stream s);
Status SigmoidGateFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView gate,
                             Stream s);
}  // namespace cuda

Status GatedRmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView z,
                              TensorView w, float eps, Stream s);
Status SigmoidGateFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView gate,
                             Stream s);

namespace internal {
// The checks shared by the CPU and CUDA versions: the bf16 op's, and `out` an FP8 activation
// of Fp8PaddedRows(T) rows and heads*d columns on the inputs' device. The sigmoid gate's
// also returns its heads.
Status CheckGatedNormFp8(const Fp8GroupActivation& out, const TensorView& x, const TensorView& z,
                         const TensorView& w);
Status CheckSigmoidGateFp8(const Fp8GroupActivation& out, const TensorView& x,
                           const TensorView& gate, int64_t* heads);
}  // namespace internal

}  // namespace tandem::kernels
