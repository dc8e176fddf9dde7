// Mixture-of-experts combine: the inverse of the permutation, weighted, plus the shared
// expert behind its sigmoid gate, added to the residual stream.
//
//   out[t] = residual[t] + sum_j w[t, j] * y[assign_row[t * k + j]]
//                        + sigmoid(shared_gate[t]) * shared[t]        (when shared is given)
//
//   residual, out: bf16 [T, H] (out may alias residual)   y: bf16 [P, H], P >= T * k
//   assign_row: i32 [T * k] (kernels/moe/routing.h)        w: f32 [T, k]
//   shared: bf16 [T, H] or empty; shared_gate: f32 [T] (the gate's logit), given with shared
//
// With row_scale, channel_scale and ids given (the row-wise FP8 experts' raw output,
// kernels/moe/experts_fp8.h), each term is scaled on the way in:
//   w[t, j] * ((y[row, c] * row_scale[row]) * channel_scale[ids[t, j], c]),  row = assign_row[t k + j]
//   row_scale: f32 [>= P]   channel_scale: f32 [E, H]   ids: i32 [T, k] (each assignment's expert)
//
// fp32 accumulation in that order (j ascending, then the shared term, then the residual),
// one rounding at the output. Rows of y must be in [0, P) and ids in [0, E) (the CPU version
// checks).
// Contiguous tensors on one device. Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

struct MoeCombineArgs {
  TensorView out, residual, y, assign_row, weights;
  TensorView shared, shared_gate;  // both or neither
  TensorView row_scale, channel_scale, ids;  // all or none
};

namespace cpu {
Status MoeCombine(const MoeCombineArgs& a, Stream s);
}
namespace cuda {
Status MoeCombine(const MoeCombineArgs& a, Stream s);
}
Status MoeCombine(const MoeCombineArgs& a, Stream s);

namespace internal {
Status CheckMoeCombine(const MoeCombineArgs& a);
}

}  // namespace tandem::kernels
