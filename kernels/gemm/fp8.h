// Block-scaled FP8 (e4m3) linear layers for the frozen target: weights with one fp32 scale
// per 128x128 block (the DeepSeek-V3 / Qwen FP8 checkpoint layout), activations with one
// fp32 scale per row per 128 columns, and the GEMM y = x W^T that consumes both.
//
// Scales multiply: value = fp8 * scale (the checkpoints' `weight_scale_inv`). Quantizing a
// group takes scale = amax / 448 (1 for an all-zero group) and stores sat_rne(v / scale),
// so the largest magnitude of every group maps to 448.
//
// Layouts (what cuBLASLt's VEC128_32F / BLK128x128_32F modes read on sm_90; measured on the
// H200 with cuBLASLt 13.1, bench/fp8_probe):
//   Fp8BlockWeight      data f8e4m3 [N, K] contiguous; scale f32 [ceil(N/128), ld],
//                       ld = Fp8WeightScaleLd(K) = ceil(K/128) rounded up to 4; block
//                       (nb, kb) at scale[nb * ld + kb]; padding columns are unused (0).
//   Fp8GroupActivation  data f8e4m3 [Mp, K] contiguous with Mp a multiple of 4 (cuBLASLt has
//                       no VEC128 kernel for other M); scale f32 flat, the group (m, kb) at
//                       scale[kb * Mp + m] ("outer-dimension major"). Quantizing x [M, K]
//                       with Mp - 4 < M <= Mp fills rows M..Mp-1 with zeros (scale 1), and
//                       the GEMM then writes Mp rows of its output: callers size row
//                       buffers with Fp8PaddedRows().
//
// Thread-safety: stateless functions ordered on `s`; Fp8Gemm follows GemmContext's rules.
#pragma once

#include <cstdint>

#include "kernels/core/tensor.h"
#include "kernels/gemm/fp8_format.h"
#include "kernels/gemm/gemm.h"

namespace tandem::kernels {

inline constexpr int64_t kFp8Block = 128;

constexpr int64_t Fp8Blocks(int64_t n) { return (n + kFp8Block - 1) / kFp8Block; }
constexpr int64_t Fp8WeightScaleLd(int64_t k) { return (Fp8Blocks(k) + 3) / 4 * 4; }
constexpr int64_t Fp8PaddedRows(int64_t m) { return (m + 3) / 4 * 4; }
// f32 elements an activation scale buffer needs for M rows (at most) of K columns.
constexpr int64_t Fp8ActScaleElems(int64_t m, int64_t k) {
  return Fp8Blocks(k) * Fp8PaddedRows(m);
}

struct Fp8BlockWeight {
  TensorView data;   // f8e4m3 [N, K]
  TensorView scale;  // f32 [ceil(N/128), Fp8WeightScaleLd(K)]
  int64_t rows() const { return data.dim(0); }
  int64_t cols() const { return data.dim(1); }
};

struct Fp8GroupActivation {
  TensorView data;   // f8e4m3 [Mp, K], Mp % 4 == 0 (a Narrow()ed row range is fine)
  TensorView scale;  // f32 [>= Fp8ActScaleElems(Mp, K)], contiguous
  // The activation for m logical rows: the first Fp8PaddedRows(m) rows of `data` (the scale
  // view is kept whole: its layout follows the row count).
  Fp8GroupActivation Rows(int64_t m) const {
    return {data.Narrow(0, 0, Fp8PaddedRows(m)), scale};
  }
};

// Packing several weights into one allocation: Fp8BlockWeightBytes(n, k) bytes hold an
// [n, k] weight's codes then its scales, each starting 256-byte aligned; CarveFp8BlockWeight
// lays one out at base + *offset (on `device`) and advances *offset by that many bytes.
int64_t Fp8BlockWeightBytes(int64_t n, int64_t k);
Fp8BlockWeight CarveFp8BlockWeight(void* base, int64_t* offset, int64_t n, int64_t k,
                                   Device device);

// Shape, dtype and device checks shared by the CPU and CUDA versions.
Status CheckFp8Weight(const char* op, const Fp8BlockWeight& w);
Status CheckFp8Activation(const char* op, const Fp8GroupActivation& a);
namespace internal {
// w and wt are FP8 weights on one device with wt [K, N] for w [N, K].
Status CheckFp8Transpose(const char* op, const Fp8BlockWeight& w, const Fp8BlockWeight& wt);
// `t` is bf16 or f32 [rows, cols] with unit column stride.
Status CheckFloatMatrix(const char* op, const char* what, const TensorView& t, int64_t rows,
                        int64_t cols);
}  // namespace internal

// wt = the transpose of w: codes [K, N] and scales [ceil(K/128), Fp8WeightScaleLd(N)] with
// block (kb, nb) = w's block (nb, kb); padding scale columns 0. Blocks are square, so this
// equals quantizing the transposed bf16 weight, bit for bit (each block keeps its amax):
// the K-major form of W that `y = g W` needs (cuBLASLt's FP8 GEMMs take K-major operands).

namespace cpu {
Status TransposeFp8Weight(const Fp8BlockWeight& w, const Fp8BlockWeight& wt, Stream s);
// w: bf16 or f32 [N, K] -> out (scale padding columns are written as 0).
Status QuantizeFp8Weight(const TensorView& w, const Fp8BlockWeight& out, Stream s);
// x: bf16 or f32 [M, K] (unit column stride), Mp - 4 < M <= Mp -> out (pad rows zero).
Status QuantizeFp8Activation(const TensorView& x, const Fp8GroupActivation& out, Stream s);
// out: bf16 or f32 [N, K] = data * scale.
Status DequantizeFp8Weight(const Fp8BlockWeight& w, const TensorView& out, Stream s);
Status DequantizeFp8Activation(const Fp8GroupActivation& a, const TensorView& out, Stream s);
// Reference: dequantizes both operands to fp32 and accumulates in float64;
// c = alpha * a W^T + beta * c, c bf16 or f32 [M, N].
Status Fp8Gemm(GemmContext* ctx, const Fp8GroupActivation& a, const Fp8BlockWeight& w,
               const TensorView& c, const GemmOptions& opt, Stream s);
}  // namespace cpu

namespace cuda {
Status TransposeFp8Weight(const Fp8BlockWeight& w, const Fp8BlockWeight& wt, Stream s);
Status QuantizeFp8Weight(const TensorView& w, const Fp8BlockWeight& out, Stream s);
Status QuantizeFp8Activation(const TensorView& x, const Fp8GroupActivation& out, Stream s);
Status DequantizeFp8Weight(const Fp8BlockWeight& w, const TensorView& out, Stream s);
// cuBLASLt e4m3 x e4m3 with VEC128 (a) and BLK128x128 (w) scales, fp32 accumulation, c bf16
// (beta 0 or 1: the residual add). REQUIRES sm_90 (FP8 tensor cores), K a multiple of 16.
Status Fp8Gemm(GemmContext* ctx, const Fp8GroupActivation& a, const Fp8BlockWeight& w,
               const TensorView& c, const GemmOptions& opt, Stream s);
// OK when device `device` has FP8 tensor cores (compute capability 9.0 or newer); otherwise
// InvalidArgument saying so.
Status CheckFp8Device(int device);
}  // namespace cuda

// Dispatch on the views' device.
Status TransposeFp8Weight(const Fp8BlockWeight& w, const Fp8BlockWeight& wt, Stream s);
Status QuantizeFp8Weight(const TensorView& w, const Fp8BlockWeight& out, Stream s);
Status QuantizeFp8Activation(const TensorView& x, const Fp8GroupActivation& out, Stream s);
Status DequantizeFp8Weight(const Fp8BlockWeight& w, const TensorView& out, Stream s);
// y = x W^T (opt.trans_b must be set, trans_a not; no bias). c: [Mp, N], Mp = a.data rows.
Status Fp8Gemm(GemmContext* ctx, const Fp8GroupActivation& a, const Fp8BlockWeight& w,
               const TensorView& c, const GemmOptions& opt, Stream s);

}  // namespace tandem::kernels
