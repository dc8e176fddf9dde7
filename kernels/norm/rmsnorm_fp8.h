// RMSNorm whose output is written straight as a block-scaled e4m3 activation (1x128 groups,
// kernels/gemm/fp8.h): the producer of the FP8 target's q/k/v and gate/up GEMM inputs, so
// the normalised rows never go to memory in bf16.
//
//   x: bf16 [M, H] (unit column stride), w: bf16 [H]
//   y = quantize(bf16(x * rstd * (weight_offset + w))),  rstd = 1 / sqrt(mean(x^2) + eps)
//   (weight_offset 0: Qwen3's RMSNorm; 1: the zero-centred `1 + w` norm of Qwen3.5)
//   out: Fp8GroupActivation [Fp8PaddedRows(M), H]; padding rows are zeros (scale 1)
//
// Numerics: the same bf16 value RmsNormForward (offset 0) or ZeroCentredRmsNormForward
// (offset 1) would store, then quantized exactly as QuantizeFp8Activation does; the CPU
// version is that composition (the norm in fp32 as kernels/norm/rmsnorm_ref.h, then
// cpu::QuantizeFp8Activation).
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"
#include "kernels/gemm/fp8.h"

namespace tandem::kernels {

namespace cpu {
Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s, float weight_offset = 0.f);
}  // namespace cpu
namespace cuda {
Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s, float weight_offset = 0.f);
}  // namespace cuda
Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s, float weight_offset = 0.f);

namespace internal {
Status CheckRmsNormFp8(const char* op, const Fp8GroupActivation& out, const TensorView& x,
                       const TensorView& w);
}  // namespace internal

}  // namespace tandem::kernels
