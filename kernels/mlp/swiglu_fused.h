// SwiGLU backward fused with the recompute of its forward output (the drafter's MLP
// backward needs both: act for the down_proj weight gradient, dgate/dup for gate_up).
//
//   gate, up, dout: bf16 [rows, I]  ->  act = silu(gate) * up            act:   bf16 [rows, I]
//                                       dgate, dup as SwiGluBackward     dgate, dup: bf16
//
// One pass reads gate, up and dout once and writes act, dgate and dup; the formulas, the
// fp32 math and the single rounding per output are those of kernels/mlp/swiglu.h, so the
// results are bitwise those of SwiGluForward followed by SwiGluBackward on the same device.
// Row-strided views as in swiglu.h (gate/up may be SplitGateUp halves). act may alias dout
// (each element is read before it is written, by the same thread); no other aliasing. One
// device. Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

namespace cpu {
Status SwiGluRecomputeBackward(TensorView act, TensorView dgate, TensorView dup, TensorView dout,
                               TensorView gate, TensorView up, Stream s);
}  // namespace cpu

namespace cuda {
Status SwiGluRecomputeBackward(TensorView act, TensorView dgate, TensorView dup, TensorView dout,
                               TensorView gate, TensorView up, Stream s);
}  // namespace cuda

Status SwiGluRecomputeBackward(TensorView act, TensorView dgate, TensorView dup, TensorView dout,
                               TensorView gate, TensorView up, Stream s);

}  // namespace tandem::kernels
