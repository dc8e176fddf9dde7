// SwiGLU activation of the Qwen3 MLP, forward and backward: out = silu(gate) * up.
//
//   gate, up: bf16 [rows, I]   out: bf16 [rows, I]
//   dgate = dout * up * sig(g) * (1 + g * (1 - sig(g)))     dgate: bf16 [rows, I]
//   dup   = dout * silu(g)                                  dup:   bf16 [rows, I]
//
// Every tensor is 2-D with a contiguous last dim; rows may be strided, so gate and up can be
// the two halves of one fused [rows, 2I] projection (SplitGateUp), and dgate/dup the halves
// of its gradient. Math in fp32, one rounding at the output. One device.
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include <utility>

#include "kernels/core/tensor.h"

namespace tandem::kernels {

// gate_up: [rows, 2I] -> (gate = [:, :I], up = [:, I:]) as row-strided views.
std::pair<TensorView, TensorView> SplitGateUp(const TensorView& gate_up);

namespace cpu {
Status SwiGluForward(TensorView out, TensorView gate, TensorView up, Stream s);
Status SwiGluBackward(TensorView dgate, TensorView dup, TensorView dout, TensorView gate,
                      TensorView up, Stream s);
}  // namespace cpu

namespace cuda {
Status SwiGluForward(TensorView out, TensorView gate, TensorView up, Stream s);
Status SwiGluBackward(TensorView dgate, TensorView dup, TensorView dout, TensorView gate,
                      TensorView up, Stream s);
}  // namespace cuda

Status SwiGluForward(TensorView out, TensorView gate, TensorView up, Stream s);
Status SwiGluBackward(TensorView dgate, TensorView dup, TensorView dout, TensorView gate,
                      TensorView up, Stream s);

namespace internal {
// Checks that every view is bf16 [rows, I] with unit column stride on one device.
Status CheckSwiGlu(const char* op, std::initializer_list<const TensorView*> views);
}  // namespace internal

}  // namespace tandem::kernels
