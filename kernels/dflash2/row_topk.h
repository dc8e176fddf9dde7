// Row-wise top-k of transformed logits: DFlash2's candidate set (the selector's ids C[t] and
// unary scores U[t], docs/dflash2.md) from a drafter's raw LM head output, CPU and CUDA.
//
//   logits  bf16 or f32 [R, V]   row stride allowed (last dim contiguous)
//   z[r, j] = softcap > 0 ? softcap * tanh(multiplier * logits[r, j] / softcap)
//                         : multiplier * logits[r, j]          (fp32)
//   ids     i32 [R, k]           the k largest z of each row, decreasing; ties by lower id
//   values  f32 [R, k]           those z (may be empty: ids only)
// z compare by the order keys of kernels/elementwise/row_topk.h (-0 == +0, NaN lowest).
// Unlike that op (f32, any k up to 1024, ids in index order, raw values), this one takes bf16
// logits and the transform and lists the candidates best first, as the selector reads them.
// 1 <= k <= kLogitsTopKMax, k <= V; multiplier finite > 0; softcap finite >= 0. ids and values
// contiguous. The fused LM head + CE (kernels/loss/lm_head_ce.h) computes the same top-k
// from each chunk's logits through the CUDA launcher below.
//
// CUDA: one block per row. Since z is non-decreasing in the logit, one read of the row
// usually suffices: each thread keeps its four largest logits, the k-th largest of the
// threads' largest bounds the answer from below, the kept logits at or above it (a second
// read collects them where a thread may have dropped some) are ranked by z in shared
// memory, and a check on the value just below the bound proves that nothing left out can
// tie with the k-th. Where it cannot be proven (the cap saturating many
// logits to the same z, long runs of equal logits) the block runs an exact radix select over
// the 32-bit order keys of z (four 8-bit passes, one collecting pass).
// The result is exact and deterministic (no float atomics) on either path. z is tanhf in fp32 on the device
// and std::tanh in fp32 on the CPU: values may differ by an ulp or two, so near-ties may
// order differently between the two versions.
// No allocation, no host sync. Thread-safety: stateless; calls are ordered on `s`.
#pragma once

#include <cstdint>

#include "kernels/core/tensor.h"
#include "runtime/core/status.h"

namespace tandem::kernels::dflash2 {

inline constexpr int64_t kLogitsTopKMax = 64;

namespace cpu {
Status RowTopK(const TensorView& ids, const TensorView& values, const TensorView& logits,
               float multiplier, float softcap, Stream s);
}  // namespace cpu

namespace cuda {
Status RowTopK(const TensorView& ids, const TensorView& values, const TensorView& logits,
               float multiplier, float softcap, Stream s);
}  // namespace cuda

// Dispatch on the tensors' device.
Status RowTopK(const TensorView& ids, const TensorView& values, const TensorView& logits,
               float multiplier, float softcap, Stream s);

namespace internal {
// Checks shared by both versions (op names the caller in errors); returns R, V and k.
Status CheckRowTopK(const char* op, const TensorView& ids, const TensorView& values,
                    const TensorView& logits, float multiplier, float softcap, int64_t* rows,
                    int64_t* vocab, int64_t* k);
// The checks of the outputs alone for R rows of V logits on `device`; returns k.
Status CheckTopKOutputs(const char* op, const TensorView& ids, const TensorView& values,
                        int64_t rows, int64_t vocab, Device device, int64_t* k);
// The transform's argument check alone (shared with the fused LM head + CE).
Status CheckLogitTransform(const char* op, float multiplier, float softcap);
// z of one value as the CPU versions compute it.
float TransformLogit(float x, float multiplier, float softcap);
}  // namespace internal

}  // namespace tandem::kernels::dflash2
