// Raw launchers of the MoE routing and combine kernels (moe.cu) on plain pointers; checks live
// in routing_cuda.cc / combine_cuda.cc. Internal to kernels/. Thread-safety: asynchronous on
// `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// logits [t, e] (f32 when logits_f32, else bf16) -> ids i32 [t, k], weights f32 [t, k].
cudaError_t LaunchMoeRouter(int32_t* ids, float* weights, const void* logits, bool logits_f32,
                            int64_t t, int64_t e, int64_t k, bool normalize, Stream s);
// ids i32 [n] in [0, e) -> offsets i32 [e + 1], perm_token i32 [n], assign_row i32 [n];
// `k` = ids per token.
cudaError_t LaunchMoePermute(int32_t* offsets, int32_t* perm_token, int32_t* assign_row,
                             const int32_t* ids, int64_t n, int64_t e, int64_t k, Stream s);
// MoePadLayout (routing.h) on raw pointers: padded_token i32 [e * cap], padded_row i32 [n].
cudaError_t LaunchMoePadLayout(int32_t* padded_token, int32_t* padded_row, const int32_t* offsets,
                               const int32_t* perm_token, const int32_t* assign_row,
                               const int32_t* ids, int64_t n, int64_t e, int64_t cap, Stream s);
// out/residual/shared bf16 [t, h], y bf16 [*, h], rows i32 [t * k], w f32 [t, k],
// shared_gate f32 [t]; shared and shared_gate may be null; row_scale f32 [*], channel_scale
// f32 [e, h] and ids i32 [t * k] all null or all given (combine.h).
cudaError_t LaunchMoeCombine(void* out, const void* residual, const void* y, const int32_t* rows,
                             const float* w, const void* shared, const float* shared_gate,
                             const float* row_scale, const float* channel_scale,
                             const int32_t* ids, int64_t t, int64_t h, int64_t k, Stream s);

// The row-wise FP8 expert kernels (experts_fp8.h) on raw pointers, one warp per row r <
// rows; a row's expert from offsets i32 [e + 1] and cap (MoeFp8Rows; offsets may be null for
// quantize rows with cap 0). x/raw/y bf16 with row strides ldx/ld; gather i32 [rows] or null;
// codes dense [rows, k] / [rows, i]; w_scale f32 [e, 2i] / [e, h]. Gather rows copies row
// gather[r] of src (dense [*, k] codes, k a multiple of 16) and its src_scale.
cudaError_t LaunchMoeFp8QuantizeRows(const void* x, int64_t ldx, const int32_t* gather,
                                     const int32_t* offsets, int64_t e, int64_t cap,
                                     int64_t rows, int64_t k, uint8_t* codes, float* scale,
                                     Stream s);
cudaError_t LaunchMoeFp8GatherRows(const uint8_t* src, const float* src_scale,
                                   const int32_t* gather, const int32_t* offsets, int64_t e,
                                   int64_t cap, int64_t rows, int64_t k, uint8_t* codes,
                                   float* scale, Stream s);
cudaError_t LaunchMoeFp8SwiGluQuantize(const void* raw, int64_t ld, const float* x_scale,
                                       const float* w_scale, const int32_t* offsets, int64_t e,
                                       int64_t cap, int64_t rows, int64_t i, uint8_t* codes,
                                       float* act_scale, Stream s);
cudaError_t LaunchMoeFp8ScaleRows(void* y, int64_t ld, const float* act_scale,
                                  const float* w_scale, const int32_t* offsets, int64_t e,
                                  int64_t cap, int64_t rows, int64_t h, Stream s);

}  // namespace tandem::kernels
