// Argument checks shared by the CPU and CUDA versions of kernels/fused_norm.h. Internal to
// kernels/. Thread-safety: pure functions.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels::internal {

// out/in: bf16 [T, heads, d] with d even, pos: i32 [T], theta > 0.
Status CheckRmsNormRope(const char* op, const TensorView& out, const TensorView& in,
                        const TensorView& pos, double theta);
// h, a, b (b and h may both be empty): bf16 [rows, H]; y, rstd, w as CheckRmsNormForward.
Status CheckAddRmsNormForward(const TensorView& h, const TensorView& y, const TensorView& rstd,
                              const TensorView& a, const TensorView& b, const TensorView& w,
                              int64_t* rows, int64_t* hd);
// As CheckRmsNormBackward with dx = dres, and dy bf16 or f32 of x's shape.
Status CheckRmsNormBackwardAdd(const TensorView& dres, const TensorView& dw, const TensorView& dy,
                               const TensorView& x, const TensorView& w, const TensorView& rstd,
                               int64_t* rows, int64_t* h);

}  // namespace tandem::kernels::internal
