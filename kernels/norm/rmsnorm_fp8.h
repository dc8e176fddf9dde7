// RMSNorm whose output is written straight as a block-scaled e4m3 activation (1x128 groups,
// kernels/gemm/fp8.h): the producer of the FP8 target's q/k/v and gate/up GEMM inputs, so
// the normalised rows never go to memory in bf16.
//
//   x: bf16 [M, H] (unit column stride), w: bf16 [H]
//   y = quantize(bf16(x * rstd * w)),  rstd = 1 / sqrt(mean(x^2) + eps)
//   out: Fp8GroupActivation [Fp8PaddedRows(M), H]; padding rows are zeros (scale 1)
//
// Numerics: the same bf16 value RmsNormForward would store, then quantized exactly as
// QuantizeFp8Activation does; the CPU version is literally that composition.
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"
#include "kernels/gemm/fp8.h"

namespace tandem::kernels {

namespace cpu {
Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s);
}  // namespace cpu
namespace cuda {
Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s);
}  // namespace cuda
Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s);

namespace internal {
Status CheckRmsNormFp8(const char* op, const Fp8GroupActivation& out, const TensorView& x,
                       const TensorView& w);
}  // namespace internal

}  // namespace tandem::kernels
