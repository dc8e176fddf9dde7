// Fused LM head + weighted cross-entropy, forward and backward in one call, for training
// against a frozen LM head. Never materialises [R, V] fp32 logits: rows are processed in
// chunks of `chunk_rows`; each chunk's logits [chunk_rows, V] are written in bf16 to a
// bounded workspace by one GEMM, a kernel computes the row's logsumexp, target logit and
// argmax and (for backward) overwrites the logits in place with
//   g[r, j] = (softmax(logits[r])[j] - [j == target[r]]) * w[r] / sum(w),
// and a second GEMM writes dHidden[chunk] = g @ W. Two GEMMs per chunk, no recompute.
//
//   hidden      bf16 [R, H]   rows fed to the LM head
//   weight      bf16 [V, H]   frozen LM head (nn.Linear layout [out, in])
//   targets     i32  [R]      target ids; outside [0, V) counts as masked
//   row_weights f32  [R]      per-row loss weight, 0 = masked
//   loss        f32  [1]      sum_r w[r] * ce[r] / sum_r w[r] over rows with a valid target
//                             (0 if those weights sum to 0)
//   argmax      i32  [R]      optional; lowest index among ties
//   correct     u8   [R]      optional; argmax == target (masked rows: 0)
//   dhidden     bf16 [R, H]   optional; d loss / d hidden; empty = forward only
//   topk_ids    i32  [R, k]   optional (with topk_values or alone); the k largest transformed
//                             logits of each row over the whole vocabulary, decreasing, ties
//                             by lower id; 1 <= k <= 64 (kernels/dflash2/row_topk.h)
//   topk_values f32  [R, k]   optional, only with topk_ids; those transformed logits
//
// Logit transform (DFlash2's output multiplier and final soft cap): every use of the logits
// (loss, argmax, correct, top-k, dhidden) is of
//   z = softcap > 0 ? softcap * tanh(multiplier * x / softcap) : multiplier * x
// for the LM head's output x; dhidden's per-logit gradient is multiplied by dz/dx =
// multiplier * (1 - (z / softcap)^2), or multiplier without a cap. The default (1, 0) is the
// identity and runs exactly the plain path.
//
// Everything stays on the device: no host sync, no allocation (the workspace comes from
// the caller, sized by LmHeadCeWorkspaceBytes). Thread-safety: calls sharing a workspace
// or GemmContext must be ordered on one stream.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/core/tensor.h"
#include "runtime/core/status.h"

namespace tandem::kernels {

struct LmHeadCeOutputs {
  TensorView loss;     // f32 [1]
  TensorView argmax;   // i32 [R] or empty
  TensorView correct;  // u8 [R] or empty
  TensorView dhidden;  // bf16 [R, H] or empty
  TensorView topk_ids;     // i32 [R, k] or empty
  TensorView topk_values;  // f32 [R, k] or empty (only with topk_ids)
};

// The logit transform above. multiplier finite > 0; softcap finite >= 0 (0: no cap).
struct LmHeadCeTransform {
  float multiplier = 1.0f;
  float softcap = 0.0f;
  bool identity() const { return multiplier == 1.0f && softcap == 0.0f; }
};

inline constexpr int64_t kLmHeadCeDefaultChunkRows = 2048;

// Bytes of workspace (a u8 [bytes] view) the CUDA version needs; the CPU version takes an
// empty view. Logits chunk bf16 [min(R, chunk_rows), round_up(V, 8)] + f32 [R] + 256.
int64_t LmHeadCeWorkspaceBytes(int64_t rows, int64_t vocab, int64_t chunk_rows);

namespace cpu {
// Reference: fp32 logits per row, logsumexp in float64, fp32 dHidden accumulation.
Status LmHeadCrossEntropy(GemmContext* ctx, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView& workspace,
                          int64_t chunk_rows, Stream s, const LmHeadCeTransform& transform = {});
}  // namespace cpu

namespace cuda {
Status LmHeadCrossEntropy(GemmContext* ctx, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView& workspace,
                          int64_t chunk_rows, Stream s, const LmHeadCeTransform& transform = {});
}  // namespace cuda

// Dispatches on hidden's device.
Status LmHeadCrossEntropy(GemmContext* ctx, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView& workspace,
                          int64_t chunk_rows, Stream s, const LmHeadCeTransform& transform = {});

namespace internal {
// Row r's top-k of the transformed logits z [V] into out.topk_ids / topk_values (decreasing,
// ties by lower id), as the kernels order them; `order` is scratch of V ids. CPU references.
void WriteRowTopK(const float* z, int64_t vocab, int64_t k, int64_t r,
                  const LmHeadCeOutputs& out, std::vector<int32_t>* order);
// The checks of everything but the weight (hidden, targets, row weights, outputs) against a
// vocabulary of `vocab`; returns R and H. Shared with the FP8 LM head (lm_head_ce_fp8.h).
Status CheckLmHeadCeRows(const char* op, const TensorView& hidden, int64_t vocab,
                         const TensorView& targets, const TensorView& row_weights,
                         const LmHeadCeOutputs& out, int64_t chunk_rows, int64_t* rows,
                         int64_t* hidden_dim);
}  // namespace internal

// Shape and dtype checks shared by both versions; returns R, H, V.
Status CheckLmHeadCeArgs(const char* op, const TensorView& hidden, const TensorView& weight,
                         const TensorView& targets, const TensorView& row_weights,
                         const LmHeadCeOutputs& out, int64_t chunk_rows, int64_t* rows,
                         int64_t* hidden_dim, int64_t* vocab);

}  // namespace tandem::kernels
