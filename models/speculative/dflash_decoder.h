// DFlash speculative decoding of one prompt: a frozen target with a decode cache and a
// DFlash drafter, the loop of z-lab's reference `spec_generate`. The target is any
// DecodeTarget (decode_target.h): the dense loader's Qwen3 / Qwen3-MoE / Llama (KV cache)
// or the Qwen3.5 / 3.6 hybrid, dense or MoE (KV cache plus Gated DeltaNet state rolled back
// by replaying the accepted prefix of a block):
//   1. the target prefills the prompt, capturing the drafter's context layers, and picks
//      the first new token;
//   2. the drafter fills one block (slot 0 = the last accepted token, slots 1.. = the mask
//      token, positions start .. start + 15) in one forward over the context features of
//      every token in the target's cache (no noise, no gradient) and picks a token per slot;
//   3. the target verifies the first B slots in one Extend, capturing their features;
//   4. the longest prefix of drafts equal to the target's own picks is accepted, plus the
//      target's pick after it (the bonus token): accept length = accepted drafts + 1;
//   5. the cache is cropped to the accepted tokens; repeat until a stop token or
//      max_new_tokens tokens.
// Differences from the reference, on purpose: the loop stops as soon as max_new_tokens
// tokens exist (the reference runs one more verify when the count lands exactly on it) and
// a stop token picked at prefill ends the generation at once.
//
// Picking rule (spec_pick.h): temperature 0 takes the argmax (ties: the lowest id) for the
// drafter and the target, and a draft is accepted while it equals the target's argmax — the
// rule of the reference loop. Above 0 it is speculative sampling: the drafter samples each
// draft from its filtered distribution (temperature, top-k, top-p), the target keeps it with
// probability min(1, p/q), redraws from max(0, p - q) at the first rejection, and draws the
// bonus token from p when all are kept, every draw keyed by (seed, prompt_index, step,
// position) so a decode repeats bit for bit. (The reference loop instead lets the drafter
// take its argmax and accepts a draft while it equals the target's sample: the same rule
// with q one-hot at the argmax, as servers verify greedy drafts; sample_drafts = false runs
// it.) Greedy picks run on the device and copy back only the ids; sampled picks with top-k
// select the candidates on the device (RowTopK) and copy back only them, other sampled picks
// copy the rows' f32 logits; the host filters and draws.
//
// A DFlash2 drafter (config().dflash2) proposes with its candidate selector instead
// (dflash2_proposal.h): the greedy causal walk over the top-k candidates at temperature 0
// (the same greedy matching), the sampled walk above it with q the selector's softmax over its
// candidates (one-hot at the greedy walk's drafts with sample_drafts = false).
//
// The drafter runs its own block size (16); B = block_size <= 16 only limits how many slots
// the target verifies. B = 1 is plain greedy decoding by the target (no drafter forward):
// the baseline of the speedup.
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
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/speculative/decode_target.h"
#include "models/speculative/dflash2_proposal.h"
#include "models/speculative/dist_reader.h"
#include "models/speculative/spec_pick.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct SpecDecodeOptions {
  int64_t max_new_tokens = 256;
  int64_t block_size = 16;  // B: slots the target verifies per step, 1 .. drafter block size
  float temperature = 0.0f;  // 0: greedy; the sampling settings of spec_pick.h
  float top_p = 1.0f;
  int64_t top_k = 0;
  uint64_t seed = 0;          // temperature > 0: the draws' key is (seed, prompt_index, ...)
  uint64_t prompt_index = 0;  // the prompt's index in its set (a batch adds each prompt's)
  // temperature > 0: drafts drawn from the drafter's filtered q (true), or its argmax with q
  // one-hot there (false: the rule of the reference loop and of servers' greedy drafts)
  bool sample_drafts = true;
  std::vector<int32_t> stop_token_ids;

  SamplingParams sampling() const { return {temperature, top_p, top_k}; }
};

struct SpecDecodeResult {
  std::vector<int32_t> tokens;          // generated tokens (the prompt excluded)
  std::vector<int32_t> accept_lengths;  // per verify step: accepted drafts + 1 (bonus)
  int64_t prefill_tokens = 0;
  double seconds = 0;  // wall time of prefill + decode, device work included
};

// Refuses a drafter that cannot serve this target, naming both values: hidden size, vocab,
// context layer ids (each < the target's depth) and num_target_layers.
Status CheckDrafterFitsTarget(const DFlashConfig& drafter, const TransformerConfig& target);
Status CheckDrafterFitsTarget(const DFlashConfig& drafter, const DecodeTargetShape& target);

inline constexpr int64_t kDrafterBlocksCuda = 4;

class DFlashDecoder {
 public:
  // `target` and `drafter` stay owned by the caller and must outlive the decoder; `drafter`
  // may be null (then only block_size 1 works). Both run on `stream` (the one they were
  // created with; null on the CPU). The drafter must have been created with max_tokens >=
  // max_context and num_blocks >= 1 (one works on CUDA too: the plan tables are 16-byte
  // aligned, checked on the H200; callers still pass kDrafterBlocksCuda there, blocks past
  // the first being padding). Allocates a KV cache and feature buffers for `max_context`
  // tokens (prompt + new tokens + one block).
  static Result<std::unique_ptr<DFlashDecoder>> Create(Qwen3Target* target,
                                                       DFlashDrafter* drafter,
                                                       int64_t max_context,
                                                       kernels::Stream stream = nullptr);
  // The same over a Qwen3.5 hybrid (its cache keeps rollback data for the drafter's block).
  static Result<std::unique_ptr<DFlashDecoder>> Create(Qwen35Target* target,
                                                       DFlashDrafter* drafter,
                                                       int64_t max_context,
                                                       kernels::Stream stream = nullptr);
  // Over any decode target (owned by the decoder); its capacity must be >= max_context and
  // its max_rollback >= the drafter's block size.
  static Result<std::unique_ptr<DFlashDecoder>> Create(std::unique_ptr<DecodeTarget> target,
                                                       DFlashDrafter* drafter,
                                                       int64_t max_context,
                                                       kernels::Stream stream = nullptr);

  // Decodes one prompt (token ids in [0, vocab), 1 <= length, length + max_new_tokens +
  // block_size <= max_context; InvalidArgument naming the limit otherwise).
  Result<SpecDecodeResult> Generate(std::span<const int32_t> prompt,
                                    const SpecDecodeOptions& options);

  int64_t max_context() const { return max_context_; }
  // A DFlash2 drafter's proposer buffers (DFlash2Proposer::WorkspaceBytes at the drafter's
  // block size); 0 for a DFlash drafter.
  int64_t proposer_bytes() const { return proposer_ ? proposer_->workspace_bytes() : 0; }

 private:
  DFlashDecoder() = default;
  Status CheckRequest(std::span<const int32_t> prompt, const SpecDecodeOptions& o) const;
  // Runs the target on `tokens` (appending them to the cache, features to rows [T, T+n))
  // and returns its logits of the last `picks` rows (rows of logits_, on the device).
  Result<kernels::TensorView> TargetStep(std::span<const int32_t> tokens, int64_t picks);
  // The drafter's forward over one block anchored after the cached context.
  Status DrafterForward(int32_t last_token);
  // The drafter's logits for slots 1 .. n of that block (DrafterForward, then the LM head).
  Result<kernels::TensorView> Draft(int32_t last_token, int64_t n);
  // A DFlash2 drafter's drafts of slots 1 .. n (DrafterForward, then the proposer); q gets
  // their distributions when sampling (temperature > 0).
  Result<std::vector<int32_t>> ProposeDFlash2(int32_t last_token, int64_t n,
                                              const SpecDecodeOptions& o, const DrawKey& key,
                                              std::vector<TokenDist>* q);
  // Greedy picks of logits [rows, V] on the decoder's device, synchronising the stream:
  // RowArgmax runs there and only the ids come back (ArgmaxRows' first maximum).
  Result<std::vector<int32_t>> Greedy(const kernels::TensorView& logits);
  // The filtered distributions of logits [rows, V] (DistReader), synchronising the stream.
  Result<std::vector<TokenDist>> Dists(const kernels::TensorView& logits, const SamplingParams& p);

  std::unique_ptr<DecodeTarget> target_;
  DFlashDrafter* drafter_ = nullptr;
  int64_t max_context_ = 0;
  kernels::Stream stream_ = nullptr;
  std::vector<int> capture_layers_;       // the drafter's target_layer_ids
  std::vector<kernels::Tensor> features_;  // per context layer: bf16 [max_context, H]
  kernels::Tensor logits_;                 // f32 [max(B), V]: target or drafter logits
  kernels::Tensor picks_;                  // i32 [max(B)]: greedy picks on the device
  std::unique_ptr<kernels::GemmContext> gemm_;  // CUDA only: the drafter's LM head
  std::vector<float> host_logits_;
  DistReader reader_;  // sampled picks
  std::unique_ptr<DFlash2Proposer> proposer_;  // a DFlash2 drafter's
};

}  // namespace tandem::models
