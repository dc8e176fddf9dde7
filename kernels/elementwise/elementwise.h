// Element-wise memory-bound ops: residual add, dtype casts and a scale by a scalar.
//
//   ResidualAdd: out = a + b            a, b, out: same shape (any), same dtype (bf16 or f32)
//   Cast:        out = in as out.dtype  bf16 <-> f32 (round to nearest even); same dtype copies
//   Scale:       out = in * scale       in, out: same shape and dtype (bf16 or f32); `scale`
//                                       finite; the fp32 product rounded once to out's dtype
//
// All tensors contiguous and on one device; math in fp32; out may alias an input.
// `cpu::` is the plain reference, `cuda::` the 16-byte-vectorised version; the unqualified
// functions dispatch on the tensors' device. Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

namespace cpu {
Status ResidualAdd(TensorView out, TensorView a, TensorView b, Stream s);
Status Cast(TensorView out, TensorView in, Stream s);
Status Scale(TensorView out, TensorView in, float scale, Stream s);
}  // namespace cpu

namespace cuda {
Status ResidualAdd(TensorView out, TensorView a, TensorView b, Stream s);
Status Cast(TensorView out, TensorView in, Stream s);
Status Scale(TensorView out, TensorView in, float scale, Stream s);
}  // namespace cuda

Status ResidualAdd(TensorView out, TensorView a, TensorView b, Stream s);
Status Cast(TensorView out, TensorView in, Stream s);
Status Scale(TensorView out, TensorView in, float scale, Stream s);

namespace internal {
// Shape/dtype checks shared by the CPU and CUDA versions.
Status CheckResidualAdd(const TensorView& out, const TensorView& a, const TensorView& b);
Status CheckCast(const TensorView& out, const TensorView& in);
Status CheckScale(const TensorView& out, const TensorView& in, float scale);
}  // namespace internal

}  // namespace tandem::kernels
