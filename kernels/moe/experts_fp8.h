// The routed experts' SwiGLU MLPs in FP8 (precision = "fp8"): the same contract as
// MoeExpertsForward (kernels/moe/experts.h), with every expert's gate|up and down matrices as
// e4m3 with one fp32 scale per 128x128 block (kernels/gemm/fp8.h) and the activations
// quantized per row per 128 columns before each projection:
//   x8, s_x  = quantize(x[rows of e])         (per expert, into its slot)
//   gate_up  = x8 W8_gu[e]^T                  (cuBLASLt e4m3 GEMM, fp32 accumulation, bf16 out)
//   act      = silu(gate) * up                (bf16)
//   a8, s_a  = quantize(act[rows of e])
//   y[rows]  = a8 W8_down[e]^T
//
// Slots. cuBLASLt's VEC128 activation scales are laid out per GEMM (group (m, kb) at
// scale[kb * Mp + m], Mp the GEMM's rows), so each expert's quantized rows get a slot of
// their own: expert e with n_e rows owns MoeFp8SlotRows(n_e) rows (0 without rows, else
// MoeBucketRows(n_e): a multiple of 16, so the GEMM plan cache sees a few dozen row counts),
// starting at S_e = the sum of the slots before it; its codes are rows [S_e, S_e + slot) of
// the code buffer and its scales the slot * ceil(K/128) floats from scale[S_e * ceil(K/128)].
// Rows past n_e in a slot are zero (scale 1). The gate|up output and act use the slot rows
// too (rows between n_e and the slot's end hold zeros' products); the down GEMM writes y at
// the expert's own rows [o_e, o_e + slot), in increasing expert order, so the rows it writes
// past o_e + n_e are overwritten by the next experts (or land in y's padding: y needs
// MoePaddedRows(N) rows, as on the loop path).
//
// The GEMMs: one cuBLASLt block-scaled e4m3 GEMM per expert with rows and projection
// (kernels/gemm/fp8.h's Fp8Gemm); cuBLASLt 13 has no grouped form of the block-scaled modes
// (kernels/moe/README.md). On the CPU the same slots and order run the reference kernels
// (cpu::Fp8Gemm: both operands dequantized, float64 accumulation): the CPU reference twin.
//
// Thread-safety: stateless functions ordered on `s` (the GemmContext's rules apply).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/core/tensor.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/gemm.h"
#include "kernels/moe/experts.h"

namespace tandem::kernels {

// Every expert's e4m3 matrices of one MoE layer, each expert an Fp8BlockWeight.
struct MoeFp8ExpertWeights {
  TensorView gate_up;        // f8e4m3 [E, 2I, H] (gate rows first, as MoeExpertWeights)
  TensorView gate_up_scale;  // f32 [E, ceil(2I/128), Fp8WeightScaleLd(H)]
  TensorView down;           // f8e4m3 [E, H, I]
  TensorView down_scale;     // f32 [E, ceil(H/128), Fp8WeightScaleLd(I)]

  bool empty() const { return gate_up.empty(); }
  int64_t experts() const { return gate_up.dim(0); }
  Fp8BlockWeight GateUp(int64_t e) const;  // expert e's [2I, H]
  Fp8BlockWeight Down(int64_t e) const;    // expert e's [H, I]
};

// Bytes of an [E, 2I, H] + [E, H, I] pair (codes then scales, each 256-byte aligned), and
// carving one out of base + *offset on `device` (advancing *offset by that many bytes).
int64_t MoeFp8ExpertBytes(int64_t experts, int64_t expert_size, int64_t hidden);
MoeFp8ExpertWeights CarveMoeFp8Experts(void* base, int64_t* offset, int64_t experts,
                                       int64_t expert_size, int64_t hidden, Device device);
// Shapes, dtypes, one device.
Status CheckMoeFp8Experts(const char* op, const MoeFp8ExpertWeights& w);

// Quantizes bf16 experts `w` into `out` (same E, I, H and device), one expert at a time
// with QuantizeFp8Weight; ordered on `s`.
Status QuantizeMoeFp8Experts(const MoeExpertWeights& w, const MoeFp8ExpertWeights& out,
                             Stream s);

// A slot's rows for an expert with n rows: 0 for n == 0, else MoeBucketRows(n).
int64_t MoeFp8SlotRows(int64_t n);
// Slot rows for `assignments` token copies over `experts` experts, whatever the routing:
// N + N/8 + 16 E (>= the sum of MoeFp8SlotRows).
int64_t MoeFp8BufferRows(int64_t assignments, int64_t experts);

// Buffers of the FP8 expert path for up to R = MoeFp8BufferRows rows and K <= max(H, I).
struct MoeFp8Workspace {
  TensorView codes;  // f8e4m3 [R, max(H, I)] (used as [R, K] for each projection)
  TensorView scale;  // f32 [R * ceil(max(H, I) / 128)]
  TensorView slots;  // i32 [E + 1]: S_e (MoeQuantizeFp8Slots writes it)
  // The codes of a projection with K columns, dense [R, K] (the first R*K bytes).
  TensorView Codes(int64_t k) const;
};
// Bytes of a MoeFp8Workspace (each part 256-byte aligned), and carving one.
int64_t MoeFp8WorkspaceBytes(int64_t assignments, int64_t experts, int64_t hidden,
                             int64_t expert_size);
MoeFp8Workspace CarveMoeFp8Workspace(void* base, int64_t* offset, int64_t assignments,
                                     int64_t experts, int64_t hidden, int64_t expert_size,
                                     Device device);

// Quantizes each expert's rows of x (bf16 [>= rows, K]) into its slot: expert e's rows are
// x rows [o_e, o_e + n_e) (from_slots false) or [S_e, S_e + n_e) (from_slots true), o_e =
// offsets[e]. offsets: i32 [E + 1] on x's device; slots: i32 [E + 1] on x's device, written
// with S_0..S_E; codes f8e4m3 [>= S_E, K] dense; scale f32 [>= S_E * ceil(K/128)].
// `host_offsets`: the same offsets on the host (sizes the launch).
namespace cpu {
Status MoeQuantizeFp8Slots(const TensorView& x, bool from_slots, const TensorView& offsets,
                           std::span<const int32_t> host_offsets, const TensorView& slots,
                           const TensorView& codes, const TensorView& scale, Stream s);
}  // namespace cpu
namespace cuda {
Status MoeQuantizeFp8Slots(const TensorView& x, bool from_slots, const TensorView& offsets,
                           std::span<const int32_t> host_offsets, const TensorView& slots,
                           const TensorView& codes, const TensorView& scale, Stream s);
}  // namespace cuda
Status MoeQuantizeFp8Slots(const TensorView& x, bool from_slots, const TensorView& offsets,
                           std::span<const int32_t> host_offsets, const TensorView& slots,
                           const TensorView& codes, const TensorView& scale, Stream s);

// MoeExpertsForward's contract with FP8 weights: offsets on the host (host_offsets) and on
// x's device (offsets, i32 [E + 1]); x bf16 [>= N, H]; gate_up bf16 [>= R, 2I] and act bf16
// [>= R, I] in slot rows (R = MoeFp8BufferRows(N, E)); y bf16 [>= MoePaddedRows(N), H] on
// either device (may be x: x is read only before any GEMM). On CUDA REQUIRES sm_90, H and I
// multiples of 16.
Status MoeFp8ExpertsForward(GemmContext* gemm, const MoeFp8ExpertWeights& w,
                            std::span<const int32_t> host_offsets, const TensorView& offsets,
                            const MoeFp8Workspace& ws, const TensorView& x,
                            const TensorView& gate_up, const TensorView& act,
                            const TensorView& y, Stream s);

}  // namespace tandem::kernels
