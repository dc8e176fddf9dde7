// DFlash2's grouped dynamic causal convolution on bf16 tensors (fp32 math), forward and
// backward, CPU and CUDA. The math and its boundary rule are those of grouped_dynamic_conv.h
// (docs/dflash2.md); this is the TensorView-level op the drafter calls for one side of one
// branch (prepare or finish).
//
//   x, y   bf16 [R, H]        rows may have a row stride (last dim contiguous); y must not
//                             overlap x
//   base   bf16 [K, H]        contiguous: one side of base_kernel [2, K, H]
//   d      bf16 [R, K * G]    any row stride, last dim contiguous: one side of the projection
//                             output [R, 2 * K * G], i.e. its Narrow(1, side * K * G, K * G);
//                             G = H / group, d[t, k * G + g] is tap k's weight of group g
//   pos[t] = t % block_size   (taps reset at every block start)
//   Conv(x)[t, c] = sum_{k < K, k <= pos[t]} (base[k, c] + d[t, k * G + c / group]) * x[t - k, c]
//
// Forward: accumulate = false: y = Conv(x); true: y += Conv(x) (the residual add fused: the
// conv in fp32, plus y in fp32, one bf16 rounding).
// Backward, given dy = dL/dy (bf16 [R, H], row stride allowed):
//   dx    bf16 [R, H]      OVERWRITTEN with dL/dx (row stride allowed; must not overlap dy,
//                          x, d or dd)
//   dbase f32  [K, H]      ACCUMULATED (+=) with dL/dbase, contiguous. The CUDA version sums
//                          per-tile partials in a fixed order through `workspace` (any dtype,
//                          contiguous, >= DynamicConvBackwardWorkspaceBytes bytes, 256-byte
//                          aligned): bitwise deterministic. The CPU version takes an empty view.
//   dd    bf16 [R, K * G]  OVERWRITTEN with dL/dd (the group's channels summed in fp32, one
//                          rounding; 0 for taps that read before the block); any row stride,
//                          must not overlap d
// Limits: 1 <= K <= kDynamicConvMaxTaps on CUDA (any K >= 1 on the CPU); group >= 1 divides
// H; block_size >= 1. CUDA fast paths: H % 8 == 0 with 16-byte aligned rows (pointers and
// row strides), and for dd in the same pass group in {1, 2, 4} or group a multiple of 8 with
// group / 8 dividing 32 (8 .. 256); every other shape runs correctly on slower paths.
// No allocation, no host sync. Thread-safety: stateless; calls are ordered on `s`.
#pragma once

#include <cstdint>

#include "kernels/core/tensor.h"
#include "runtime/core/status.h"

namespace tandem::kernels::dflash2 {

// Largest K the CUDA kernels take (taps are unrolled into registers).
inline constexpr int64_t kDynamicConvMaxTaps = 8;

// Bytes of the workspace the CUDA backward needs for `rows` rows of width `hidden` and
// `taps` taps (f32 partial dbase per tile of rows); 0 when rows == 0.
int64_t DynamicConvBackwardWorkspaceBytes(int64_t rows, int64_t hidden, int64_t taps);

namespace cpu {
Status DynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                          const TensorView& d, int64_t group, int64_t block_size, bool accumulate,
                          Stream s);
Status DynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                           const TensorView& dy, const TensorView& x, const TensorView& base,
                           const TensorView& d, int64_t group, int64_t block_size,
                           const TensorView& workspace, Stream s);
}  // namespace cpu

namespace cuda {
Status DynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                          const TensorView& d, int64_t group, int64_t block_size, bool accumulate,
                          Stream s);
Status DynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                           const TensorView& dy, const TensorView& x, const TensorView& base,
                           const TensorView& d, int64_t group, int64_t block_size,
                           const TensorView& workspace, Stream s);
}  // namespace cuda

// Dispatch on the tensors' device.
Status DynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                          const TensorView& d, int64_t group, int64_t block_size, bool accumulate,
                          Stream s);
Status DynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                           const TensorView& dy, const TensorView& x, const TensorView& base,
                           const TensorView& d, int64_t group, int64_t block_size,
                           const TensorView& workspace, Stream s);

namespace internal {
// Sizes of one call, from the checks shared by both versions.
struct DynamicConvDims {
  int64_t rows = 0;    // R
  int64_t hidden = 0;  // H
  int64_t taps = 0;    // K
  int64_t groups = 0;  // G
};
Status CheckDynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                               const TensorView& d, int64_t group, int64_t block_size,
                               DynamicConvDims* dims);
Status CheckDynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                                const TensorView& dy, const TensorView& x, const TensorView& base,
                                const TensorView& d, int64_t group, int64_t block_size,
                                DynamicConvDims* dims);
}  // namespace internal

}  // namespace tandem::kernels::dflash2
