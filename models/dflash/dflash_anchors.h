// Which blocks a DFlash training step predicts: anchor sampling over a packed batch and the
// per-block tables (token ids, positions, targets, loss weights) the drafter consumes.
// Host-side and cheap (O(T + anchors*16)); a trainer builds the next plan while the device
// runs the current step.
//
// Anchor a is eligible when loss_mask[a] and loss_mask[a+1] hold and a+1 is in a's document.
// Block b (anchor a, document [s, e)) has block_size slots j = 0..bs-1:
//   block_ids[b*bs + j] = j == 0 ? input_ids[a] : mask_token_id
//   block_pos[b*bs + j] = position_ids[a] + j
//   targets  [b*bs + j] = input_ids[a+j] if j >= 1, a+j < e and loss_mask[a+j], else -1
//   weights  [b*bs + j] = exp(-(j-1)/gamma) for those slots, else 0 (gamma: the loss decay)
//   prev_ids [b*bs + j] = input_ids[a+j-1] if j >= 1 and a+j-1 < e, else -1 (DFlash2's
//                         teacher-forced previous token, loss mask or not)
// Missing blocks (fewer eligible anchors than asked) are padding: anchor 0, empty context,
// weight 0, so the step's shapes never change.
//
// Thread-safety: pure functions over caller-owned spans.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::models {

// Host view of a packed batch's metadata.
struct PackedBatchMeta {
  std::span<const int32_t> input_ids;     // [T]
  std::span<const int32_t> position_ids;  // [T], restart at 0 in every document
  std::span<const int32_t> cu_seqlens;    // [D+1], 0 .. T
  std::span<const uint8_t> loss_mask;     // [T]; empty means every token counts
};

// Loss weight of block slot j >= 1: exp(-(j-1)/loss_decay). REQUIRES: loss_decay > 0.
float DFlashSlotWeight(int64_t j, double loss_decay);

// The loss decay gamma for a block size when none is given: 1 + 3 * block_size / 8, the line
// through the public recipe's two values (7 at block 16, 4 at block 8).
double DFlashDefaultLossDecay(int64_t block_size);

// All eligible anchors in increasing order. InvalidArgument on inconsistent metadata.
Result<std::vector<int32_t>> EligibleAnchors(const PackedBatchMeta& meta);

// Up to `count` distinct eligible anchors, sorted, a pure function of (meta, seed, step)
// (Philox4x32-10 keyed by seed, counter by step). Per-document fairness: every document
// with an eligible anchor gets one before any document gets a second (while count allows),
// the rest are uniform without replacement.
Result<std::vector<int32_t>> SampleAnchors(const PackedBatchMeta& meta, int64_t count,
                                           uint64_t seed, uint64_t step);

// Up to `per_document` distinct eligible anchors from every document (all of a document's
// when it has fewer), each drawn uniformly without replacement from that document's eligible
// positions, and at most `count` in all: when the documents together would take more, each
// takes an equal share c (the largest with sum_d min(its count, c) <= count), and the blocks
// left over go one each to documents drawn uniformly among those that had more. Sorted; a
// pure function of (meta, seed, step) like SampleAnchors.
Result<std::vector<int32_t>> SampleAnchorsPerDocument(const PackedBatchMeta& meta,
                                                      int64_t per_document, int64_t count,
                                                      uint64_t seed, uint64_t step);

struct DFlashBlockPlan {
  int64_t num_blocks = 0;  // NB (including padding blocks)
  int64_t block_size = 0;
  int64_t tokens = 0;      // T
  std::vector<int32_t> anchors;    // [NB]
  std::vector<int32_t> doc_start;  // [NB]
  std::vector<int32_t> block_ids;  // [NB*bs]
  std::vector<int32_t> block_pos;  // [NB*bs]
  std::vector<int32_t> targets;    // [NB*bs], -1 = no target
  std::vector<float> weights;      // [NB*bs]
  std::vector<int32_t> ctx_pos;    // [T] = position_ids
  // [NB*bs] or empty. DFlash2's selector reads the previous token of each loss row here;
  // empty (a plan built by hand): the previous slot's target, the anchor for slot 1, which
  // is -1 (no pair term) after a slot without loss.
  std::vector<int32_t> prev_ids;
};

// REQUIRES: anchors sorted, eligible, at most num_blocks of them; loss_decay > 0
// (InvalidArgument otherwise).
Result<DFlashBlockPlan> BuildBlockPlan(const PackedBatchMeta& meta,
                                       std::span<const int32_t> anchors, int64_t num_blocks,
                                       int64_t block_size, int32_t mask_token_id,
                                       double loss_decay);

}  // namespace tandem::models
