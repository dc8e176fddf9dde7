// RMSNorm over the last dimension, forward and backward (Qwen3 input/post-attention norms,
// the drafter's hidden_norm, and per-head q_norm/k_norm).
//
//   x: bf16 [rows, H]   (any leading shape: [T, heads, head_dim] normalises each head over
//                        head_dim with w: [head_dim], which is q_norm/k_norm)
//   w: bf16 [H]
//   y    = x * rstd * w,  rstd = 1 / sqrt(mean(x^2) + eps)        y: bf16 [rows, H]
//   rstd: f32 [rows] saved for backward (may be empty in forward)
//   g    = dy * w
//   dx   = rstd * (g - x * rstd^2 * mean(g * x))                   dx: bf16 [rows, H]
//   dw  += sum_rows dy * x * rstd                                   dw: f32 [H] (accumulated)
//
// Math in fp32 with one rounding to bf16 at the output (HF rounds x*rstd to bf16 before the
// weight multiply; the difference is at most one bf16 ulp). The CUDA backward reduces dw
// deterministically through `workspace`: f32 [RmsNormBackwardWorkspaceRows(), H] (unused on
// the CPU, may be empty there). All tensors contiguous and on one device; y may alias x and
// dx may alias dy (each row is read in full before it is written).
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

// Largest H supported by the CUDA kernels (a row is at most one block of 512 threads, each
// holding up to 32 elements).
constexpr int64_t kRmsNormMaxH = 16384;

// Rows of the f32 [rows, H] workspace the CUDA backward needs (partial dw per block).
constexpr int64_t RmsNormBackwardWorkspaceRows() { return 528; }

namespace cpu {
Status RmsNormForward(TensorView y, TensorView rstd, TensorView x, TensorView w, float eps,
                      Stream s);
Status RmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x, TensorView w,
                       TensorView rstd, TensorView workspace, Stream s);
}  // namespace cpu

namespace cuda {
Status RmsNormForward(TensorView y, TensorView rstd, TensorView x, TensorView w, float eps,
                      Stream s);
Status RmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x, TensorView w,
                       TensorView rstd, TensorView workspace, Stream s);
}  // namespace cuda

Status RmsNormForward(TensorView y, TensorView rstd, TensorView x, TensorView w, float eps,
                      Stream s);
Status RmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x, TensorView w,
                       TensorView rstd, TensorView workspace, Stream s);

namespace internal {
// Checks shared by both versions; returns rows and H through the pointers.
Status CheckRmsNormForward(const TensorView& y, const TensorView& rstd, const TensorView& x,
                           const TensorView& w, int64_t* rows, int64_t* h);
Status CheckRmsNormBackward(const TensorView& dx, const TensorView& dw, const TensorView& dy,
                            const TensorView& x, const TensorView& w, const TensorView& rstd,
                            int64_t* rows, int64_t* h);
// CUDA-side checks shared by the RMSNorm and fused-norm kernels: H within kRmsNormMaxH, and
// the backward's dw workspace (f32, contiguous, on x's device, >= [RmsNormBackwardWorkspaceRows(), h]).
Status CheckRmsNormCudaWidth(const char* op, int64_t h);
Status CheckRmsNormWorkspace(const char* op, const TensorView& workspace, const TensorView& x,
                             int64_t h);
}  // namespace internal

}  // namespace tandem::kernels
