// RMSNorm fused with its neighbours in the Qwen3/DFlash layer, so each pair of memory-bound
// passes moves its tensors once:
//
//   RmsNormRopeForward:   y = rope(rmsnorm(x) * w, pos)   per head (q_norm/k_norm + RoPE)
//     x, y: bf16 [T, heads, d]   w: bf16 [d]   pos: i32 [T]   rstd: f32 [T*heads] (saved)
//   RopeRmsNormBackward:  g = rope^T(dy); dx, dw from g as RmsNormBackward (dw accumulated)
//     dy, x, dx: bf16 [T, heads, d]   dw: f32 [d]   rstd: f32 [T*heads]
//   AddRmsNormForward:    h = a + b (rounded to bf16, written), y = rmsnorm(h) * w, rstd
//     a, b, h, y: bf16 [rows, H]   w: bf16 [H]   rstd: f32 [rows]
//     With b and h empty: y = rmsnorm(a) * w, bitwise what a call with b gives for the same
//     h (same reduction order), so a backward can rebuild the fused forward's y exactly.
//   RmsNormBackwardAdd:   dres += RmsNormBackward(dy, x, w, rstd).dx; dw accumulated
//     dy: bf16 or f32 [rows, H]   x, dres: bf16 [rows, H]   dw: f32 [H]   rstd: f32 [rows]
//
// Formulas are those of kernels/norm/rmsnorm.h and kernels/rope/rope.h (full rotation, rotary_dim =
// d, two-halves layout). Math in fp32 with one rounding per output: unlike the unfused
// sequence, the normed value is not rounded to bf16 before the rotation, the rotated
// gradient not before the norm backward, and dx not before the residual add (each a
// difference of at most about one bf16 ulp). AddRmsNormForward normalises the rounded h,
// so it is bitwise the unfused ResidualAdd + RmsNormForward on the CPU. The CUDA backwards
// reduce dw deterministically through `workspace`: f32 [RmsNormBackwardWorkspaceRows(), d
// or H] (unused on the CPU, may be empty there). All tensors contiguous and on one device;
// y may alias x in RmsNormRopeForward, h may alias a or b in AddRmsNormForward, and dx may
// alias dy in RopeRmsNormBackward (a row is read in full before it is written).
// CUDA limits: d even, d <= 2 * kRopeMaxRotaryDim / 2 = 512; H <= kRmsNormMaxH.
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/rope/rope.h"
#include "kernels/core/tensor.h"

namespace tandem::kernels {

namespace cpu {
Status RmsNormRopeForward(TensorView y, TensorView rstd, TensorView x, TensorView w,
                          TensorView pos, float eps, double theta, Stream s);
Status RopeRmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x,
                           TensorView w, TensorView rstd, TensorView pos, double theta,
                           TensorView workspace, Stream s);
Status AddRmsNormForward(TensorView h, TensorView y, TensorView rstd, TensorView a, TensorView b,
                         TensorView w, float eps, Stream s);
Status RmsNormBackwardAdd(TensorView dres, TensorView dw, TensorView dy, TensorView x,
                          TensorView w, TensorView rstd, TensorView workspace, Stream s);
}  // namespace cpu

namespace cuda {
Status RmsNormRopeForward(TensorView y, TensorView rstd, TensorView x, TensorView w,
                          TensorView pos, float eps, double theta, Stream s);
Status RopeRmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x,
                           TensorView w, TensorView rstd, TensorView pos, double theta,
                           TensorView workspace, Stream s);
Status AddRmsNormForward(TensorView h, TensorView y, TensorView rstd, TensorView a, TensorView b,
                         TensorView w, float eps, Stream s);
Status RmsNormBackwardAdd(TensorView dres, TensorView dw, TensorView dy, TensorView x,
                          TensorView w, TensorView rstd, TensorView workspace, Stream s);
}  // namespace cuda

Status RmsNormRopeForward(TensorView y, TensorView rstd, TensorView x, TensorView w,
                          TensorView pos, float eps, double theta, Stream s);
Status RopeRmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x,
                           TensorView w, TensorView rstd, TensorView pos, double theta,
                           TensorView workspace, Stream s);
Status AddRmsNormForward(TensorView h, TensorView y, TensorView rstd, TensorView a, TensorView b,
                         TensorView w, float eps, Stream s);
Status RmsNormBackwardAdd(TensorView dres, TensorView dw, TensorView dy, TensorView x,
                          TensorView w, TensorView rstd, TensorView workspace, Stream s);

}  // namespace tandem::kernels
