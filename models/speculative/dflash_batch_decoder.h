// DFlash speculative decoding of many prompts, several at a time: the loop of
// dflash_decoder.h (prefill, draft a block, verify it, accept the longest matching prefix
// plus the bonus token, crop), with up to `batch` sequences in flight sharing each forward:
//   * the drafter fills one block per live sequence in one forward: their context features
//     are packed one document per sequence (each block sees only its own document: the
//     drafter's doc_start/anchor tables, as in training) with positions restarting at 0;
//   * the target verifies every live sequence's block in one ExtendBatch (the projections,
//     norms and MLP over all rows at once, the attention per sequence over its own cache in
//     a Qwen3BatchKvCache);
//   * greedy picks copy the logits to the host; sampled ones go through DistReader (with
//     top-k only the candidates come back);
//   * when a sequence ends (stop token or max_new_tokens) its slot takes the next prompt,
//     prefilled alone (prefill is compute-bound already; batching pays in the decode steps,
//     which read every weight for a handful of tokens).
// A DFlash2 drafter proposes every live block with its candidate selector
// (dflash2_proposal.h, as DFlashDecoder does); its sampled walks run per block, keyed by the
// prompt's own draws.
// Per prompt the tokens, accept lengths and (temperature > 0) samples are those of
// DFlashDecoder::Generate on it alone with prompt_index options.prompt_index + its index:
// every draw is keyed by (seed, prompt index, step, position), never by the batch, and on
// the CPU every row is computed as in a forward of its own (the reference kernels compute
// rows independently; a test checks equality). On CUDA the GEMMs may round differently at
// other row counts, so greedy ties (and sampled draws near a boundary) may break apart.
//
// Thread-safety: thread-compatible; the decoder drives the target's and drafter's streams.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/gemm/gemm.h"
#include "models/dflash/dflash_drafter.h"
#include "models/qwen3/qwen3_batch_kv_cache.h"
#include "models/qwen3/qwen3_target.h"
#include "models/speculative/dflash_decoder.h"
#include "runtime/core/status.h"

namespace tandem::models {

// The drafter's num_blocks for `batch` sequences on `device`: batch on the CPU, rounded up
// to a multiple of kDrafterBlocksCuda on CUDA (the block tables' alignment).
int64_t DrafterBlocksForBatch(int64_t batch, kernels::Device device);

class DFlashBatchDecoder {
 public:
  // As DFlashDecoder::Create, for `batch` >= 1 sequences of up to `max_context` tokens each.
  // The drafter (may be null: block size 1 only) needs num_blocks >= batch and max_tokens >=
  // batch * max_context; the target max_tokens >= batch * its block size (checked per call).
  static Result<std::unique_ptr<DFlashBatchDecoder>> Create(Qwen3Target* target,
                                                            DFlashDrafter* drafter,
                                                            int64_t batch, int64_t max_context,
                                                            kernels::Stream stream = nullptr);

  // Decodes every prompt; results in prompt order. Each prompt is checked as in
  // DFlashDecoder::Generate before anything runs (errors name the prompt's index). A
  // result's `seconds` is its own span from prefill to end (spans of a batch overlap).
  Result<std::vector<SpecDecodeResult>> GenerateAll(std::span<const std::vector<int32_t>> prompts,
                                                    const SpecDecodeOptions& options);

  int64_t batch() const { return cache_.sequences(); }
  int64_t max_context() const { return max_context_; }

 private:
  struct Slot;
  DFlashBatchDecoder() = default;
  Status CheckRequest(std::span<const std::vector<int32_t>> prompts,
                      const SpecDecodeOptions& o) const;
  // Prefills `prompt` into sequence `s` (features to its rows) and returns the first pick.
  Result<int32_t> Prefill(int64_t s, std::span<const int32_t> prompt, const SamplingParams& sp,
                          const DrawKey& key);
  // The drafter's picks for slots 1 .. n of one block per live sequence (`live` = sequence
  // ids, `last` = their last tokens, `keys` = their draws' keys): [live.size()][n]; when
  // sampling, (*q)[b] gets the distributions they were drawn from (one-hot at the argmax
  // unless `sample_drafts`).
  Result<std::vector<std::vector<int32_t>>> Draft(std::span<const int64_t> live,
                                                  std::span<const int32_t> last, int64_t n,
                                                  const SamplingParams& sp, bool sample_drafts,
                                                  std::span<const DrawKey> keys,
                                                  std::vector<std::vector<TokenDist>>* q);
  // After Draft's drafter forward, a DFlash2 drafter's drafts (and q) of slots 1 .. n of
  // each live block (dflash2_proposal.h).
  Result<std::vector<std::vector<int32_t>>> ProposeDFlash2(
      std::span<const int32_t> last, int64_t n, const SamplingParams& sp, bool sample_drafts,
      std::span<const DrawKey> keys, std::vector<std::vector<TokenDist>>* q);
  // The verdict on one sequence's block: at temperature 0 greedy matching over the target's
  // host logits [block.size(), V] of it; above, VerifyBySampling of the drafter's `q` against
  // the target's `p` (one per block row).
  SampledVerify Pick(std::span<const int32_t> block, const float* logits,
                     std::span<const TokenDist> q, std::span<const TokenDist> p,
                     const SamplingParams& sp, const DrawKey& key) const;
  // Verifies each live sequence's block in one ExtendBatch and copies the captured features
  // to each sequence's rows. Greedy: leaves the target's f32 logits [sum of block sizes, V]
  // in host_logits_ and returns nothing; sampling: returns the target's filtered
  // distributions of those rows (DistReader).
  Result<std::vector<TokenDist>> Verify(std::span<const int64_t> live,
                                        std::span<const std::vector<int32_t>> blocks,
                                        const SamplingParams& sp);

  Qwen3Target* target_ = nullptr;
  DFlashDrafter* drafter_ = nullptr;
  int64_t max_context_ = 0;
  kernels::Stream stream_ = nullptr;
  Qwen3BatchKvCache cache_;
  std::vector<int> capture_layers_;        // the drafter's target_layer_ids
  std::vector<kernels::Tensor> features_;  // per layer: bf16 [batch * max_context, H]
  std::vector<kernels::Tensor> packed_;    // per layer: the drafter's packed contexts, same
  std::vector<kernels::Tensor> captured_;  // per layer: bf16 [batch * block, H] verify rows
  kernels::Tensor logits_;                 // f32 [batch * block, V]
  std::unique_ptr<kernels::GemmContext> gemm_;  // CUDA only: the drafter's LM head
  std::vector<float> host_logits_;
  DistReader reader_;  // sampled picks: candidates or rows to the host, filtered
  std::unique_ptr<DFlash2Proposer> proposer_;  // a DFlash2 drafter's
};

}  // namespace tandem::models
