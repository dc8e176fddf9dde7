// SwiGLU whose output is written straight as a block-scaled e4m3 activation (1x128 groups,
// kernels/gemm/fp8.h): the producer of the FP8 target's down_proj input.
//
//   gate, up: bf16 [M, I] (row-strided halves of one gate|up GEMM output are fine)
//   out = quantize(bf16(silu(gate) * up)): Fp8GroupActivation [Fp8PaddedRows(M), I]
//
// Numerics: the bf16 value SwiGluForward would store, quantized as QuantizeFp8Activation
// does; the CPU version is that composition. Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"
#include "kernels/gemm/fp8.h"

namespace tandem::kernels {

namespace cpu {
Status SwiGluFp8Forward(const Fp8GroupActivation& out, TensorView gate, TensorView up, Stream s);
}  // namespace cpu
namespace cuda {
Status SwiGluFp8Forward(const Fp8GroupActivation& out, TensorView gate, TensorView up, Stream s);
}  // namespace cuda
Status SwiGluFp8Forward(const Fp8GroupActivation& out, TensorView gate, TensorView up, Stream s);

namespace internal {
Status CheckSwiGluFp8(const char* op, const Fp8GroupActivation& out, const TensorView& gate,
                      const TensorView& up);
}  // namespace internal

}  // namespace tandem::kernels
