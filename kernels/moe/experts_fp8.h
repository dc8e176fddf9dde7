// The routed experts' SwiGLU MLPs in FP8 (precision = "fp8"): the contract of the bf16
// experts (kernels/moe/experts.h) with every expert's gate|up and down matrices in e4m3 with
// one fp32 scale per output row ("row-wise"), and the activations quantized with one scale
// per row:
//   x8, s_x   = quantize(x rows)                       (one scale per row over its H values)
//   raw_gu    = x8 W8_gu^T                              (unscaled e4m3 GEMM, bf16 out)
//   act       = silu(raw_g s_x s_gu[e]) * (raw_u s_x s_gu[e])   } one fused kernel
//   a8, s_a   = quantize(act rows)                              }
//   raw_y     = a8 W8_down^T                            (unscaled e4m3 GEMM, bf16 out)
//   y         = raw_y s_a s_down[e]                     (in place, or in MoeLayer's combine)
// Since s_x[r] and s_w[e, n] factor out of each K-sum, the GEMMs run on the codes alone
// (kernels/gemm/fp8_raw.h): cuBLASLt 13.1 runs a strided batch of e4m3 GEMMs with scalar
// scales, but refuses strided batches with block or row-wise scales (kernels/moe/README.md).
//
// Quantizing a row: scale = amax / 448 (1 for an all-zero row), code = e4m3 round to nearest
// even, saturating, of v / scale (IEEE division; kernels/gemm/fp8_format.h): the CPU and CUDA
// versions produce the same codes from the same floats.
//
// Two row layouts (MoeFp8Rows):
//   padded (cap > 0): expert e owns rows [e cap, e cap + cap), its count_e rows first, then
//     padding (zero codes, scale 1; their outputs are never read). x is the token matrix and
//     padded_token (MoePadLayout, kernels/moe/routing.h) says which token each row takes:
//     the gather is fused with the quantization. Each projection is ONE strided-batched GEMM
//     over all E experts. What MoeLayer runs where MoeChooseExpertsPath picks kPadded.
//   exact (cap == 0): expert e's rows are [o_e, o_e+1) of the permuted rows (x already
//     gathered); one GEMM per expert with rows and projection. On CUDA each runs on
//     MoeBucketRows(count) rows (few plan shapes), reading and writing rows of the experts
//     after it (which overwrite them: experts run in increasing order) or of the padding:
//     buffers need MoePaddedRows(N) rows. Rows past N hold garbage. The skewed-routing path.
// On the CPU the same steps run the reference kernels (float64 GEMM sums of the codes'
// products): the CPU reference twin.
//
// CUDA REQUIRES sm_90; H and I multiples of 16 (cuBLASLt's FP8 alignment), refused otherwise.
// Thread-safety: stateless functions ordered on `s` (the GemmContext's rules apply).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/core/tensor.h"
#include "kernels/gemm/gemm.h"
#include "kernels/moe/experts.h"

namespace tandem::kernels {

// Every routed expert's e4m3 matrices of one MoE layer, row-wise scaled: value of
// gate_up[e, n, c] = e4m3(code) * gate_up_scale[e, n] (likewise down).
struct MoeFp8ExpertWeights {
  TensorView gate_up;        // f8e4m3 [E, 2I, H] (gate rows first, as MoeExpertWeights)
  TensorView gate_up_scale;  // f32 [E, 2I]
  TensorView down;           // f8e4m3 [E, H, I]
  TensorView down_scale;     // f32 [E, H]

  bool empty() const { return gate_up.empty(); }
  int64_t experts() const { return gate_up.dim(0); }
};

// Bytes of an [E, 2I, H] + [E, H, I] pair (codes then scales, each 256-byte aligned), and
// carving one out of base + *offset on `device` (advancing *offset by that many bytes).
int64_t MoeFp8ExpertBytes(int64_t experts, int64_t expert_size, int64_t hidden);
MoeFp8ExpertWeights CarveMoeFp8Experts(void* base, int64_t* offset, int64_t experts,
                                       int64_t expert_size, int64_t hidden, Device device);
// Shapes, dtypes, contiguity, one device.
Status CheckMoeFp8Experts(const char* op, const MoeFp8ExpertWeights& w);

// Quantizes bf16 experts `w` into `out` (same E, I, H and device), one scale per row of each
// matrix (MoeFp8QuantizeRows); ordered on `s`.
Status QuantizeMoeFp8Experts(const MoeExpertWeights& w, const MoeFp8ExpertWeights& out,
                             Stream s);

// Rows of the FP8 path's buffers: R = MoeExpertBufferRows(N) (>= E cap wherever the padded
// layout runs, >= MoePaddedRows(N)).
int64_t MoeFp8BufferRows(int64_t assignments);

// Buffers of the FP8 expert path for up to R rows and K <= max(H, I) columns (also the
// shared expert's block-scaled activations, MoeLayer).
struct MoeFp8Workspace {
  TensorView codes;  // f8e4m3 [R, max(H, I)] (used as [R, K] for each projection)
  TensorView scale;  // f32 [R * (2 + ceil(max(H, I) / 128))]
  int64_t rows() const { return codes.dim(0); }
  // The codes of a projection with K columns, dense [R, K] (the first R*K bytes).
  TensorView Codes(int64_t k) const;
  TensorView XScale() const { return scale.Narrow(0, 0, rows()); }          // f32 [R]
  TensorView ActScale() const { return scale.Narrow(0, rows(), rows()); }   // f32 [R]
  // f32 [R * ceil(max(H, I) / 128)] after those two: block scales for other FP8 GEMMs (the
  // shared expert's) that leave ActScale to the combine.
  TensorView BlockScale() const {
    return scale.Narrow(0, 2 * rows(), scale.numel() - 2 * rows());
  }
};
int64_t MoeFp8WorkspaceBytes(int64_t assignments, int64_t hidden, int64_t expert_size);
MoeFp8Workspace CarveMoeFp8Workspace(void* base, int64_t* offset, int64_t assignments,
                                     int64_t hidden, int64_t expert_size, Device device);

// Which expert each buffer row belongs to. cap > 0: the padded layout (row r is expert
// r / cap's row r % cap, padding past its count); cap == 0: rows [o_e, o_e+1) are expert e's.
// `rows`: the rows processed (E cap, or N). offsets: i32 [E + 1] on the buffers' device (may
// be empty for MoeFp8QuantizeRows with cap == 0: every row is a data row).
struct MoeFp8Rows {
  TensorView offsets;
  int64_t cap = 0;
  int64_t rows = 0;
};

// The three kernels of the path, each as cpu::, cuda:: and dispatch on the buffers' device:
//  MoeFp8QuantizeRows: row r < rows.rows of codes/scale from x row (gather empty ? r :
//    gather[r]) (x bf16 [*, K] unit column stride; gather i32 [>= rows]); padding rows get
//    zero codes and scale 1. codes f8e4m3 [>= rows, K] dense, scale f32 [>= rows].
//  MoeFp8GatherRows: row r < rows.rows of codes/scale is row gather[r] of src/src_scale
//    (rows quantized once by MoeFp8QuantizeRows, e.g. the tokens: each token's codes then
//    reach its k expert rows without quantizing it k times); padding rows get zero codes and
//    scale 1. src f8e4m3 [T, K] dense, src_scale f32 [>= T], gather i32 [>= rows] in [0, T);
//    codes f8e4m3 [>= rows, K] dense, scale f32 [>= rows]. CUDA: K a multiple of 16.
//  MoeFp8SwiGluQuantize: for data rows r of expert e, g = raw[r, c] s_x[r] s_w[e, c],
//    u = raw[r, I + c] s_x[r] s_w[e, I + c], act = silu(g) u (fp32: g / (1 + exp(-g)) * u),
//    quantized per row into codes [>= rows, I] dense and act_scale [>= rows]; padding rows:
//    zero codes, scale 1. raw bf16 [>= rows, 2I]; w_scale f32 [E, 2I].
//  MoeFp8ScaleRows: y[r, c] = bf16(y[r, c] s_a[r] s_w[e, c]) in place for data rows (padding
//    rows untouched). y bf16 [>= rows, H]; w_scale f32 [E, H].
namespace cpu {
Status MoeFp8QuantizeRows(const TensorView& x, const TensorView& gather, const MoeFp8Rows& rows,
                          const TensorView& codes, const TensorView& scale, Stream s);
Status MoeFp8GatherRows(const TensorView& src, const TensorView& src_scale,
                        const TensorView& gather, const MoeFp8Rows& rows, const TensorView& codes,
                        const TensorView& scale, Stream s);
Status MoeFp8SwiGluQuantize(const TensorView& raw, const TensorView& x_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows,
                            const TensorView& codes, const TensorView& act_scale, Stream s);
Status MoeFp8ScaleRows(const TensorView& y, const TensorView& act_scale,
                       const TensorView& w_scale, const MoeFp8Rows& rows, Stream s);
}  // namespace cpu
namespace cuda {
Status MoeFp8QuantizeRows(const TensorView& x, const TensorView& gather, const MoeFp8Rows& rows,
                          const TensorView& codes, const TensorView& scale, Stream s);
Status MoeFp8GatherRows(const TensorView& src, const TensorView& src_scale,
                        const TensorView& gather, const MoeFp8Rows& rows, const TensorView& codes,
                        const TensorView& scale, Stream s);
Status MoeFp8SwiGluQuantize(const TensorView& raw, const TensorView& x_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows,
                            const TensorView& codes, const TensorView& act_scale, Stream s);
Status MoeFp8ScaleRows(const TensorView& y, const TensorView& act_scale,
                       const TensorView& w_scale, const MoeFp8Rows& rows, Stream s);
}  // namespace cuda
Status MoeFp8QuantizeRows(const TensorView& x, const TensorView& gather, const MoeFp8Rows& rows,
                          const TensorView& codes, const TensorView& scale, Stream s);
Status MoeFp8GatherRows(const TensorView& src, const TensorView& src_scale,
                        const TensorView& gather, const MoeFp8Rows& rows, const TensorView& codes,
                        const TensorView& scale, Stream s);
Status MoeFp8SwiGluQuantize(const TensorView& raw, const TensorView& x_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows,
                            const TensorView& codes, const TensorView& act_scale, Stream s);
Status MoeFp8ScaleRows(const TensorView& y, const TensorView& act_scale,
                       const TensorView& w_scale, const MoeFp8Rows& rows, Stream s);

// The exact layout: offsets on the host (host_offsets) and on x's device (offsets, i32
// [E + 1]); x bf16 [P, H] (the permuted rows); gate_up bf16 [P, 2I] (raw products); y bf16
// [P, H] (may be x: x is read only before any GEMM); ws for N rows; P >= MoePaddedRows(N) on
// CUDA, >= N on the CPU. rescale false skips the last step: y keeps down's raw products and
// the caller applies ws.ActScale() per row and w.down_scale per expert and channel (MoeLayer
// does, in the combine: kernels/moe/combine.h), saving a pass over y.
Status MoeFp8ExpertsForward(GemmContext* gemm, const MoeFp8ExpertWeights& w,
                            std::span<const int32_t> host_offsets, const TensorView& offsets,
                            const MoeFp8Workspace& ws, const TensorView& x,
                            const TensorView& gate_up, const TensorView& y, Stream s,
                            bool rescale = true);
// The padded layout: x bf16 [T, H] (the tokens), padded_token i32 [>= E cap] (MoePadLayout);
// gate_up bf16 [>= E cap, 2I]; y bf16 [>= E cap, H] (not x); cap >= every count, E cap <=
// ws.rows(). rescale: as for MoeFp8ExpertsForward. Where tokens feed two rows or more
// (N >= 2T, as with top-k routing), each token is quantized once, into gate_up's bytes
// (free until the first GEMM; they must hold T H bytes), and its codes gathered to its rows
// (MoeFp8GatherRows); otherwise the quantization reads the rows through padded_token. The
// codes are the same either way.
Status MoeFp8ExpertsForwardPadded(GemmContext* gemm, const MoeFp8ExpertWeights& w,
                                  std::span<const int32_t> host_offsets,
                                  const TensorView& offsets, int64_t cap,
                                  const MoeFp8Workspace& ws, const TensorView& x,
                                  const TensorView& padded_token, const TensorView& gate_up,
                                  const TensorView& y, Stream s, bool rescale = true);

namespace internal {
// The kernels' shared checks (experts_fp8_cpu.cc).
Status CheckMoeFp8QuantizeRows(const char* op, const TensorView& x, const TensorView& gather,
                               const MoeFp8Rows& rows, const TensorView& codes,
                               const TensorView& scale);
Status CheckMoeFp8GatherRows(const char* op, const TensorView& src,
                             const TensorView& src_scale, const TensorView& gather,
                             const MoeFp8Rows& rows, const TensorView& codes,
                             const TensorView& scale);
Status CheckMoeFp8SwiGlu(const char* op, const TensorView& raw, const TensorView& x_scale,
                         const TensorView& w_scale, const MoeFp8Rows& rows,
                         const TensorView& codes, const TensorView& act_scale);
Status CheckMoeFp8ScaleRows(const char* op, const TensorView& y, const TensorView& act_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows);
}  // namespace internal

}  // namespace tandem::kernels
