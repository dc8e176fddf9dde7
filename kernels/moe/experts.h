// The routed experts' SwiGLU MLPs over the permuted token copies (kernels/moe/routing.h):
// for each expert e with rows [o_e, o_e+1) of x,
//   gate_up = x[rows] W_gu[e]^T  (W_gu [E, 2I, H]: gate rows first, as transformers fuses them)
//   act     = silu(gate) * up
//   y[rows] = act W_down[e]^T    (W_down [E, H, I])
//
// This is the measured baseline: one cuBLASLt GEMM per expert and projection, issued from the
// host, so it needs the expert offsets on the host (the caller copies them once per layer:
// its one host sync). A grouped GEMM that reads the offsets on the device (one launch per
// projection, no host sync) is the next step; `tandem-bench moe` measures this loop against
// the dense bf16 rate.
//
// Row buckets: on CUDA each expert's GEMM runs on MoeBucketRows(n) rows instead of n, so the
// GEMM plan cache (keyed by shape) sees a few dozen row counts instead of every count. The
// extra rows read past the expert's range and write into the next experts' rows, which those
// experts overwrite afterwards (experts run in increasing order), or into the padding at the
// end: x, gate_up, act and y need MoePaddedRows(N) rows, and rows past N hold garbage.
// On the CPU each GEMM runs on exactly n rows (the reference twin: same loop, cpu::Gemm).
//
// Thread-safety: stateless; ordered on `s` (the GemmContext's rules apply).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/core/tensor.h"
#include "kernels/gemm/gemm.h"

namespace tandem::kernels {

struct MoeExpertWeights {
  TensorView gate_up;  // bf16 [E, 2I, H]
  TensorView down;     // bf16 [E, H, I]
};

// n rounded up to a multiple of max(16, 2^(bit_width(n) - 4)): fewer than n/8 + 16 extra rows.
int64_t MoeBucketRows(int64_t n);
// Rows the permuted buffers need for `assignments` token copies on CUDA.
int64_t MoePaddedRows(int64_t assignments);

// offsets: host i32 [E + 1] (non-decreasing, offsets[0] == 0); x bf16 [P, H]; gate_up bf16
// [P, 2I]; act bf16 [P, I]; y bf16 [P, H] (y may be x: x is read only before y is written);
// P >= MoePaddedRows(offsets[E]) on CUDA, >= offsets[E] on the CPU.
Status MoeExpertsForward(GemmContext* gemm, const MoeExpertWeights& w,
                         std::span<const int32_t> offsets, const TensorView& x,
                         const TensorView& gate_up, const TensorView& act, const TensorView& y,
                         Stream s);

}  // namespace tandem::kernels
