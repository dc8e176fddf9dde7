// The unscaled e4m3 GEMM, strided over a batch: the GEMM of the row-wise FP8 experts
// (kernels/moe/experts_fp8.h), whose per-row and per-output-channel scales factor out of the
// K-sum and are applied by the kernel that consumes the output:
//
//   c[b M + r, j] = sum_p e4m3(a[b M + r, p]) * e4m3(w[b, j, p])     b < batch, r < M, j < N
//
// a: f8e4m3 [batch M, K] (unit column stride, row stride lda >= K); w: f8e4m3 [batch, N, K]
// contiguous; c: bf16 [batch M, N] (unit column stride). The codes' values (E4m3ToFloat) are
// multiplied with no scale: |c| <= 448^2 K, inside bf16's range for any K below 2^109.
//
// CUDA: one cuBLASLt strided-batched e4m3 GEMM (its scalar scales left unset, i.e. 1; fp32
// accumulation, bf16 out), the plan cached in the GemmContext as every GEMM's. cuBLASLt 13.1
// runs this mode batched where it refuses block (VEC128 / BLK128x128) and row-wise
// (OUTER_VEC_32F) scales (bench/fp8_probe). REQUIRES sm_90; K and N multiples of 16 (refused
// otherwise, naming the shape); a refused plan is an error naming the shape, never a fallback.
// CPU: the reference: float64 sums of the codes' products, rounded once to bf16.
//
// Thread-safety: stateless, ordered on `s` (GemmContext's rules apply).
#pragma once

#include <cstdint>

#include "kernels/core/tensor.h"
#include "kernels/gemm/gemm.h"

namespace tandem::kernels {

namespace cpu {
Status Fp8GemmRaw(GemmContext* ctx, const TensorView& a, const TensorView& w,
                  const TensorView& c, int64_t batch, Stream s);
}  // namespace cpu
namespace cuda {
Status Fp8GemmRaw(GemmContext* ctx, const TensorView& a, const TensorView& w,
                  const TensorView& c, int64_t batch, Stream s);
}  // namespace cuda
// Dispatch on a's device.
Status Fp8GemmRaw(GemmContext* ctx, const TensorView& a, const TensorView& w,
                  const TensorView& c, int64_t batch, Stream s);

namespace internal {
// Both versions' checks: dtypes, batch >= 1 dividing a's rows, shapes, strides, one device.
Status CheckFp8GemmRaw(const char* op, const TensorView& a, const TensorView& w,
                       const TensorView& c, int64_t batch);
}  // namespace internal

}  // namespace tandem::kernels
