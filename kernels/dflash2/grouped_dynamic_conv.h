// DFlash2's grouped dynamic causal convolution (z-lab/dflash dflash/model.py,
// GroupedDynamicCausalConv), CPU reference in T = float or double, forward and backward.
//
// Purpose. Each DFlash2 layer wraps its attention and its MLP in one such convolution:
//   u  = the branch input (the RMSNorm'd residual stream), [rows, H]
//   d  = u . W^T, W: [2 * K * G, H] (kernel_projection, no bias), viewed per row as
//        [2 (side), K (tap), G (group)]: the per-token dynamic weights, all from u
//   y  = Conv(u; base[0], d[side 0])     "prepare": what the branch consumes
//   z  = branch(y)                        attention or the MLP
//   out = Conv(z; base[1], d[side 1])     "finish": what is added to the residual
// with base: [2, K, H] (base_kernel; initialized to the identity, tap 0 = 1) and
//   Conv(x; b, d)[t, c] = sum_{k < K, k <= pos[t]} (b[k, c] + d[t, k, c / group]) * x[t - k, c].
// The dynamic weight of tap k belongs to the OUTPUT row t (not the row t - k it reads) and is
// shared by the `group` consecutive channels of group c / group; finish's dynamic weights come
// from the prepare input u, not from the branch output z.
//
// Boundaries. The reference convolves one draft block [anchor, mask, ..] at a time with the
// rows before the block zero-padded: tap k of row t reads nothing when t < k. The trainers
// (SpecForge, speculators) keep that per proposal block: blocks packed in one sequence are
// not mixed, the taps reset at every block start. Here `pos[t]` is row t's index inside its
// block (or any segment: 0 at the segment's first row, pos[t - 1] + 1 after), so one packed
// batch of blocks, or segments of any lengths, is convolved exactly as the reference
// convolves each one alone. For DFlash's layout pos[t] = t % block_size.
//
// Contract. Row-major arrays; H = G * group; `d` rows have stride ld_d >= K * G (so a side of
// a [rows, 2, K, G] tensor is addressed as d + side * K * G with ld_d = 2 * K * G). REQUIRES
// pos[t] == 0 or pos[t] == pos[t - 1] + 1. Backward ACCUMULATES into dx, dbase and dd (zero
// them first for a fresh gradient). Thread-safety: pure functions on caller-owned arrays.
#pragma once

#include <cstdint>

namespace tandem::kernels::dflash2 {

struct ConvShape {
  int64_t rows = 0;    // packed rows
  int64_t hidden = 0;  // H
  int64_t taps = 0;    // K (conv_kernel_size)
  int64_t group = 0;   // channels per group (conv_group_size); divides hidden
  int64_t groups() const { return hidden / group; }
};

// y[rows, H] = Conv(x; base[K, H], d) as above.
template <typename T>
void GroupedDynamicConvForward(const ConvShape& s, const T* x, const T* base, const T* d,
                               int64_t ld_d, const int32_t* pos, T* y);

// Given dy = dL/dy: dx[rows, H] += dL/dx, dbase[K, H] += dL/dbase, dd (stride ld_d) += dL/dd.
template <typename T>
void GroupedDynamicConvBackward(const ConvShape& s, const T* x, const T* base, const T* d,
                                int64_t ld_d, const int32_t* pos, const T* dy, T* dx, T* dbase,
                                T* dd);

// The dynamic weights d[rows, 2 * K * G] = u[rows, H] . w^T, w: [2 * K * G, H].
template <typename T>
void DynamicKernelForward(const ConvShape& s, const T* u, const T* w, T* d);
// du[rows, H] += dd . w, dw[2 * K * G, H] += dd^T . u.
template <typename T>
void DynamicKernelBackward(const ConvShape& s, const T* u, const T* w, const T* dd, T* du,
                           T* dw);

}  // namespace tandem::kernels::dflash2
