// DFlash2's candidate selector as TensorView ops (CPU and CUDA): scores forward, the strict
// top-k loss, the scores backward, the unary logits' backward through the frozen LM head, and
// the decode walks (greedy and sampled). The math is candidate_selector.h's; this file fixes
// the dtypes, layouts and device contract the drafter uses. docs/dflash2.md.
//
// Shapes: R rows (draft positions), k candidates per row (1 <= k <= kSelectorMaxTopK), rank Rk,
// vocab V, hidden H. All tensors contiguous, on one device.
//   proj   f32 or bf16 [R, Rk]  hidden . hidden_projection^T (the caller's GEMM)
//   pred   bf16 [V, Rk]         predecessor_codebook
//   succ   bf16 [V, Rk]         successor_codebook
//   prev   i32 [R]              the token before each row; outside [0, V): no pair term
//   ids    i32 [R, k]           candidate ids, in [0, V) (REQUIRES; the CPU version checks)
//   unary  f32 [R, k]           the candidates' transformed logits
//   scores f32 [R, k]           unary + sum_q pred[prev, q] * proj[r, q] * succ[ids[r, j], q]
//
// Loss (the strict top-k objective): L = sum_r w[r] c[r] CE(scores[r], slot of target[r] in
// ids[r]) / sum_r w[r] c[r], c[r] = 1 when target[r] is among ids[r] (first matching slot),
// rows with w[r] <= 0 ignored; L = 0 and zero gradient when the denominator is 0.
//
// Determinism. Forward, loss, CandidateHeadBackward and the walks are deterministic on the GPU
// (fixed-order reductions, no atomics; a given seed gives the same sample). The CUDA
// SelectorScoresBackward adds into dpred and dsucc with float atomics (rows sharing a prev
// token or a candidate id are summed in an unspecified order), so those two gradients may
// differ in the last bits between runs; dproj is deterministic.
//
// No op allocates or synchronizes with the host. Thread-safety: stateless; ordered on `s`.
#pragma once

#include <cstdint>

#include "kernels/core/tensor.h"

namespace tandem::kernels::dflash2 {

// Largest k the CUDA kernels take (a row's candidates are two per lane of one warp).
constexpr int64_t kSelectorMaxTopK = 64;
// Largest Rk the CUDA kernels take (a warp keeps pred[prev] * proj[r] in shared memory).
constexpr int64_t kSelectorMaxRank = 2048;

// Dispatchers (by the tensors' device); the cpu:: and cuda:: versions below take the same
// arguments.

// scores f32 [R, k] (overwritten).
Status SelectorScoresForward(const TensorView& scores, const TensorView& proj,
                             const TensorView& pred, const TensorView& succ,
                             const TensorView& prev, const TensorView& ids,
                             const TensorView& unary, Stream s);

// loss f32 [1] = L; stats i32 [2] = {covered rows (w > 0 and target among ids), correct rows
// (covered, and the first slot with the highest score is the target's)}; dscores f32 [R, k]
// OVERWRITTEN with scale * dL/dscores (scale: the loss weight the trainer applies).
// targets i32 [R] (any value; one not among ids is a miss), weights f32 [R].
Status SelectorLoss(const TensorView& loss, const TensorView& stats, const TensorView& dscores,
                    const TensorView& scores, const TensorView& ids, const TensorView& targets,
                    const TensorView& weights, float scale, Stream s);

// dproj f32 or bf16 [R, Rk] OVERWRITTEN with dL/dproj; dpred, dsucc f32 [V, Rk] ACCUMULATED
// (+=, scattered by prev and ids; CUDA: float atomics, see Determinism). dL/dunary is dscores.
Status SelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                              const TensorView& dsucc, const TensorView& dscores,
                              const TensorView& proj, const TensorView& pred,
                              const TensorView& succ, const TensorView& prev,
                              const TensorView& ids, Stream s);

// The unary logits' gradient through the logit transform and the frozen LM head:
// dhidden bf16 [R, H] += sum_j dunary[r, j] * t'(r, j) * lm_head[ids[r, j], :] (read, summed
// in fp32, one rounding), t' = multiplier * (1 - (values[r, j] / softcap)^2) when softcap > 0,
// else multiplier. dunary, values f32 [R, k] (values: the transformed logits, i.e. unary);
// lm_head bf16 [V, H].
Status CandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                             const TensorView& values, const TensorView& ids,
                             const TensorView& lm_head, float multiplier, float softcap,
                             Stream s);

// Decode walks. Rows form blocks of block_rows consecutive draft positions, one block per
// anchor (anchors i32 [R / block_rows]; R must be a multiple). Within a block prev is the
// anchor for the first row, then the token chosen at the row before (an anchor outside
// [0, V) gives the first row no pair term). path i32 [R] = the chosen ids.
// Greedy: the first slot with the highest score.
Status SelectorGreedyWalk(const TensorView& path, const TensorView& proj, const TensorView& pred,
                          const TensorView& succ, const TensorView& ids, const TensorView& unary,
                          const TensorView& anchors, int64_t block_rows, Stream s);

// Sampled, temperature > 0: probs f32 [R, k] = q = softmax(scores / temperature) with prev =
// the token sampled at the row before (the proposal distribution rejection sampling needs);
// the slot is the first j whose running sum q[0] + ... + q[j] exceeds
// u = PhiloxUniform(seed, offset, r) (random/philox.h; r the row index), or the last slot
// with q > 0 when rounding leaves none. Deterministic for (seed, offset).
Status SelectorSampleWalk(const TensorView& path, const TensorView& probs, const TensorView& proj,
                          const TensorView& pred, const TensorView& succ, const TensorView& ids,
                          const TensorView& unary, const TensorView& anchors, int64_t block_rows,
                          float temperature, uint64_t seed, uint64_t offset, Stream s);

namespace cpu {
Status SelectorScoresForward(const TensorView& scores, const TensorView& proj,
                             const TensorView& pred, const TensorView& succ,
                             const TensorView& prev, const TensorView& ids,
                             const TensorView& unary, Stream s);
Status SelectorLoss(const TensorView& loss, const TensorView& stats, const TensorView& dscores,
                    const TensorView& scores, const TensorView& ids, const TensorView& targets,
                    const TensorView& weights, float scale, Stream s);
Status SelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                              const TensorView& dsucc, const TensorView& dscores,
                              const TensorView& proj, const TensorView& pred,
                              const TensorView& succ, const TensorView& prev,
                              const TensorView& ids, Stream s);
Status CandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                             const TensorView& values, const TensorView& ids,
                             const TensorView& lm_head, float multiplier, float softcap,
                             Stream s);
Status SelectorGreedyWalk(const TensorView& path, const TensorView& proj, const TensorView& pred,
                          const TensorView& succ, const TensorView& ids, const TensorView& unary,
                          const TensorView& anchors, int64_t block_rows, Stream s);
Status SelectorSampleWalk(const TensorView& path, const TensorView& probs, const TensorView& proj,
                          const TensorView& pred, const TensorView& succ, const TensorView& ids,
                          const TensorView& unary, const TensorView& anchors, int64_t block_rows,
                          float temperature, uint64_t seed, uint64_t offset, Stream s);
}  // namespace cpu

namespace cuda {
Status SelectorScoresForward(const TensorView& scores, const TensorView& proj,
                             const TensorView& pred, const TensorView& succ,
                             const TensorView& prev, const TensorView& ids,
                             const TensorView& unary, Stream s);
Status SelectorLoss(const TensorView& loss, const TensorView& stats, const TensorView& dscores,
                    const TensorView& scores, const TensorView& ids, const TensorView& targets,
                    const TensorView& weights, float scale, Stream s);
Status SelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                              const TensorView& dsucc, const TensorView& dscores,
                              const TensorView& proj, const TensorView& pred,
                              const TensorView& succ, const TensorView& prev,
                              const TensorView& ids, Stream s);
Status CandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                             const TensorView& values, const TensorView& ids,
                             const TensorView& lm_head, float multiplier, float softcap,
                             Stream s);
Status SelectorGreedyWalk(const TensorView& path, const TensorView& proj, const TensorView& pred,
                          const TensorView& succ, const TensorView& ids, const TensorView& unary,
                          const TensorView& anchors, int64_t block_rows, Stream s);
Status SelectorSampleWalk(const TensorView& path, const TensorView& probs, const TensorView& proj,
                          const TensorView& pred, const TensorView& succ, const TensorView& ids,
                          const TensorView& unary, const TensorView& anchors, int64_t block_rows,
                          float temperature, uint64_t seed, uint64_t offset, Stream s);
}  // namespace cuda

namespace internal {

// Sizes the checks below return.
struct SelectorDims {
  int64_t rows = 0, top_k = 0, rank = 0, vocab = 0, hidden = 0, blocks = 0;
};

// Argument checks shared by the CPU and CUDA versions (dtypes, shapes, contiguity, one
// device); errors name the op and the argument.
Status CheckSelectorScoresForward(const TensorView& scores, const TensorView& proj,
                                  const TensorView& pred, const TensorView& succ,
                                  const TensorView& prev, const TensorView& ids,
                                  const TensorView& unary, SelectorDims* d);
Status CheckSelectorLoss(const TensorView& loss, const TensorView& stats,
                         const TensorView& dscores, const TensorView& scores,
                         const TensorView& ids, const TensorView& targets,
                         const TensorView& weights, SelectorDims* d);
Status CheckSelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                                   const TensorView& dsucc, const TensorView& dscores,
                                   const TensorView& proj, const TensorView& pred,
                                   const TensorView& succ, const TensorView& prev,
                                   const TensorView& ids, SelectorDims* d);
Status CheckCandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                                  const TensorView& values, const TensorView& ids,
                                  const TensorView& lm_head, float multiplier, float softcap,
                                  SelectorDims* d);
// Greedy and sampled walks; probs may be empty for the greedy walk (pass TensorView()).
Status CheckSelectorWalk(const char* op, const TensorView& path, const TensorView& probs,
                         const TensorView& proj, const TensorView& pred, const TensorView& succ,
                         const TensorView& ids, const TensorView& unary,
                         const TensorView& anchors, int64_t block_rows, SelectorDims* d);

}  // namespace internal

}  // namespace tandem::kernels::dflash2
