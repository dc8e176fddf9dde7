// DFlash2's low-rank candidate selector (z-lab/dflash dflash/model.py, CandidateSelector) and
// its training loss as the released trainers define it (SpecForge's OnlineDFlashModel
// selector terms; speculators' DFlash2 compute_selector_loss), CPU reference in T = float or
// double.
//
// Purpose. The drafter's logits (after output multiplier and soft cap, logit_softcap.h) keep
// their top-k per draft position: candidate ids C[t, 0..k) and unary values U[t, j] (the
// logits themselves). A candidate is scored against the token before it:
//   P[t]        = h[t] . Wh^T                       (hidden_projection, [R, H], no bias)
//   S[t, j]     = U[t, j] + sum_r A[prev[t], r] * P[t, r] * B[C[t, j], r]
// with A = predecessor_codebook [V, R], B = successor_codebook [V, R], h the drafter's final
// normed hidden row (the one the LM head reads). At decode the walk is greedy and causal
// (SelectorGreedyPath): prev of the first draft position is the anchor token, then each
// chosen token (not a Viterbi search). In training prev is teacher-forced: the true token of
// the previous slot (the anchor's for slot 1).
//
// Loss (the strict top-k objective): a K-way cross entropy over the candidates, counted only
// where the target token is among them (a target outside the top-k is a recall miss of the
// backbone and gives the selector no gradient; nothing is injected into the set):
//   L = sum_t w[t] c[t] CE(S[t], index of target[t] in C[t]) / sum_t w[t] c[t]
// c[t] = 1 when target[t] is in C[t], w[t] >= 0 the caller's weight (the loss mask times the
// DFlash position decay, 0 for anchor slots and padding). L = 0 with zero gradient when the
// denominator is 0. The trainers add alpha * L to the unary DFlash loss (alpha: 1.0 by
// default in SpecForge and speculators; docs/dflash2.md).
//
// Contract. Row-major arrays; ids are in [0, V). Backward ACCUMULATES into its outputs (zero
// them first). Thread-safety: pure functions on caller-owned arrays.
#pragma once

#include <cstdint>

namespace tandem::kernels::dflash2 {

struct SelectorShape {
  int64_t rows = 0;    // draft positions
  int64_t hidden = 0;  // H
  int64_t vocab = 0;   // V
  int64_t rank = 0;    // R (selector_rank)
  int64_t top_k = 0;   // k (selector_top_k), <= V
};

// ids[rows, k], values[rows, k]: each row's k largest logits, in decreasing value, equal
// values by increasing id (torch.topk leaves ties unspecified; the set differs only on ties).
template <typename T>
void SelectorTopK(const SelectorShape& s, const T* logits, int32_t* ids, T* values);

// proj[rows, R] = hidden . wh^T; scores[rows, k] as above.
template <typename T>
void SelectorScoresForward(const SelectorShape& s, const T* hidden, const T* wh, const T* pred,
                           const T* succ, const int32_t* prev, const int32_t* ids,
                           const T* unary, T* proj, T* scores);

// Given dscores: dlogits[rows, V] += dL/dU scattered to the candidate ids (nullable),
// dhidden[rows, H], dwh[R, H], dpred[V, R], dsucc[V, R] += their gradients.
template <typename T>
void SelectorScoresBackward(const SelectorShape& s, const T* hidden, const T* wh, const T* pred,
                            const T* succ, const int32_t* prev, const int32_t* ids,
                            const T* proj, const T* dscores, T* dlogits, T* dhidden, T* dwh,
                            T* dpred, T* dsucc);

struct SelectorLossResult {
  double loss = 0;
  double weight = 0;        // sum_t w[t] c[t], the denominator
  int64_t covered = 0;      // rows with w > 0 whose target is a candidate
  int64_t correct = 0;      // of those, rows whose top score is the target (teacher-forced)
};

// The loss above; dscores[rows, k] is OVERWRITTEN with dL/dS.
template <typename T>
SelectorLossResult SelectorLoss(const SelectorShape& s, const T* scores, const int32_t* ids,
                                const int32_t* target, const T* weight, T* dscores);

// Decode: the greedy causal walk over `n` consecutive draft positions of one block, from
// `anchor`: path[i] = C[i, argmax_j S(prev, j)], prev = path[i - 1] (anchor for i = 0); equal
// scores pick the lower j. proj, ids, unary: those n rows.
template <typename T>
void SelectorGreedyPath(const SelectorShape& s, int64_t n, const T* proj, const T* pred,
                        const T* succ, const int32_t* ids, const T* unary, int32_t anchor,
                        int32_t* path);

}  // namespace tandem::kernels::dflash2
