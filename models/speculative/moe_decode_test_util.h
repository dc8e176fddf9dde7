// Test-only utilities for speculative decoding over any DecodeTarget (used by the
// mixture-of-experts decode tests of both families): a tiny random DFlash drafter for a
// target shape, plain greedy decoding that recomputes the whole sequence from an empty cache
// for every token (no state carried or rolled back), the lossless check of greedy
// speculative decoding at several block sizes, the seeded check of sampled decoding, and a
// `tandem eval` request over a target directory with a drafter saved next to its prompts.
//
// Contract: gtest assertions report failures. PlainGreedy and TinyEvalRequest run on the CPU;
// the drafter functions work on either device.
// Thread-safety: none needed (tests run on one thread).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/random/philox.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_drafter.h"
#include "models/speculative/decode_target.h"
#include "models/speculative/dflash_decoder.h"
#include "models/speculative/spec_eval_run.h"

namespace tandem::models::testing {

// A 2-layer DFlash drafter (4 heads of `head_dim`, 2 KV heads; CUDA's block attention takes
// 64, 128 or 256) over target layers `layer_ids` of a target of shape `t`; block 16, the mask
// token the last id.
inline DFlashConfig TinyDrafterForShape(const DecodeTargetShape& t, std::vector<int64_t> layer_ids,
                                        int64_t head_dim = 16) {
  DFlashConfig c;
  TransformerConfig& l = c.layers;
  l.model_type = "qwen3";
  l.architectures = {"DFlashDraftModel"};
  l.vocab_size = t.vocab_size;
  l.hidden_size = t.hidden_size;
  l.num_hidden_layers = 2;
  l.num_attention_heads = 4;
  l.num_key_value_heads = 2;
  l.head_dim = head_dim;
  l.rotary_dim = head_dim;
  l.intermediate_size = 96;
  l.max_position_embeddings = 4096;
  l.rms_norm_eps = 1e-6;
  l.rope_theta = 10000.0;
  l.layer_types = {LayerType::kFullAttention, LayerType::kFullAttention};
  c.block_size = 16;
  c.mask_token_id = t.vocab_size - 1;
  c.num_target_layers = t.num_hidden_layers;
  c.target_layer_ids = std::move(layer_ids);
  return c;
}

// Matrices uniform(-0.3, 0.3), norms uniform(0.8, 1.2): drafts that depend on the context.
// On the drafter's stream (its device synchronised before returning).
inline void RandomizeDrafter(DFlashDrafter& d, uint32_t seed) {
  DFlashParams& params = d.params();
  std::vector<float> host(params.layout.total);
  for (const DFlashParamSpec& s : params.layout.specs)
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i) {
      const float u = 2 * kernels::PhiloxUniform(seed, 9, i) - 1;
      host[i] = s.is_norm ? 1.0f + 0.2f * u : 0.3f * u;
    }
  ASSERT_TRUE(kernels::CopyFromHost(params.master, host.data(), d.stream()).ok());
  ASSERT_TRUE(params.SyncCompute(d.stream()).ok());
  ASSERT_TRUE(kernels::SynchronizeStream(d.device(), d.stream()).ok());
}

// Plain greedy decoding of `n` tokens by a CPU `target`: for every new token the cache is
// reset, the whole sequence prefilled, and the argmax (lowest id on ties) of its last row
// taken. Every call starts from an empty cache, so nothing is carried or rolled back.
inline std::vector<int32_t> PlainGreedy(DecodeTarget& target, std::vector<int32_t> seq, int n) {
  const int64_t v = target.shape().vocab_size;
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int64_t t = static_cast<int64_t>(seq.size());
    std::vector<float> logits(t * v);
    EXPECT_TRUE(target.Reset().ok());
    const Status st =
        target.Extend(seq, {}, kernels::TensorView(logits.data(), kernels::DType::kF32, {t, v}));
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return out;
    const float* row = logits.data() + (t - 1) * v;
    const int32_t tok = static_cast<int32_t>(std::max_element(row, row + v) - row);
    out.push_back(tok);
    seq.push_back(tok);
  }
  return out;
}

// Which kinds of verify step a run of ExpectGreedyLossless saw.
struct AcceptKinds {
  bool partial = false;  // a step accepted a proper part of its drafts (a multi-token rollback)
  bool full = false;     // a step accepted every draft of a block longer than 1
};

// Greedy speculative decoding of `prompt` at block sizes 1, 2, 5 and 16 gives exactly
// `plain` (the target's own greedy tokens), with consistent accept lengths.
inline AcceptKinds ExpectGreedyLossless(DFlashDecoder& decoder, const std::vector<int32_t>& prompt,
                                        const std::vector<int32_t>& plain) {
  const int64_t n = static_cast<int64_t>(plain.size());
  SpecDecodeOptions o;
  o.max_new_tokens = n;
  AcceptKinds kinds;
  for (int64_t b : {1, 2, 5, 16}) {
    o.block_size = b;
    auto r = decoder.Generate(prompt, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return kinds;
    EXPECT_EQ(r->tokens, plain) << "block size " << b;
    // One entry per verify step, each in [1, b], committing exactly the generated tokens
    // after the prefill's pick (the last step may be cut at max_new_tokens).
    const int64_t committed =
        1 + std::accumulate(r->accept_lengths.begin(), r->accept_lengths.end(), int64_t{0});
    EXPECT_GE(committed, n);
    EXPECT_LT(committed - (r->accept_lengths.empty() ? 0 : r->accept_lengths.back()), n);
    for (int32_t len : r->accept_lengths) {
      EXPECT_GE(len, 1);
      EXPECT_LE(len, b);
      kinds.partial |= len > 1 && len < b;
      kinds.full |= b > 1 && len == b;
    }
    if (b == 1) {
      EXPECT_EQ(r->accept_lengths, std::vector<int32_t>(n - 1, 1));
    }
    fmt::print("block {} accept lengths: {}\n", b, fmt::join(r->accept_lengths, " "));
  }
  return kinds;
}

// The MoE targets' variants that must decode other tokens than the target as is.
enum class MoeVariant { kAsIs, kExpertsZeroed, kRouterRotated };

// The lossless test of a MoE target: `target`'s greedy tokens of a fixed prompt, which the
// same weights with zeroed experts or rotated router rows (`load(variant)`) do not give (so a
// decode that skipped the MoE blocks, or routed every token alike, could not match them), are
// what greedy speculative decoding with `drafter` gives at every block size, with blocks
// accepted both in part (`partial_note` says what that exercises) and whole.
inline void ExpectMoeGreedyLossless(
    std::unique_ptr<DecodeTarget> target, DFlashDrafter* drafter,
    const std::function<std::unique_ptr<DecodeTarget>(MoeVariant)>& load,
    const char* partial_note) {
  const std::vector<int32_t> prompt = {3, 1, 1, 4, 4, 4, 3, 2, 0};
  constexpr int kNew = 48;
  const std::vector<int32_t> plain = PlainGreedy(*target, prompt, kNew);
  ASSERT_EQ(plain.size(), static_cast<size_t>(kNew));
  for (MoeVariant v : {MoeVariant::kExpertsZeroed, MoeVariant::kRouterRotated}) {
    std::unique_ptr<DecodeTarget> other = load(v);
    ASSERT_NE(other, nullptr);
    EXPECT_NE(PlainGreedy(*other, prompt, kNew), plain)
        << (v == MoeVariant::kExpertsZeroed ? "zeroed experts" : "rotated router")
        << " decode the same tokens";
  }
  auto decoder = DFlashDecoder::Create(std::move(target), drafter, 128);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  const AcceptKinds kinds = ExpectGreedyLossless(**decoder, prompt, plain);
  EXPECT_TRUE(kinds.partial) << "no block was accepted in part: " << partial_note
                             << " went untested";
  EXPECT_TRUE(kinds.full) << "no block was accepted whole";
}

// Speculative sampling at temperature 1: a seed repeats tokens and accept lengths (so Reset
// empties every state), the tokens stay in the vocabulary, and another seed draws others.
inline void ExpectSampledIsSeeded(DFlashDecoder& decoder, const std::vector<int32_t>& prompt,
                                  int64_t vocab) {
  SpecDecodeOptions o;
  o.max_new_tokens = 24;
  o.block_size = 5;
  o.temperature = 1.0f;
  o.seed = 3;
  auto a = decoder.Generate(prompt, o);
  auto b = decoder.Generate(prompt, o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << " " << b.status().ToString();
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->accept_lengths, b->accept_lengths);
  EXPECT_EQ(a->tokens.size(), 24u);
  for (int32_t t : a->tokens) EXPECT_LT(t, vocab);
  o.seed = 4;
  auto c = decoder.Generate(prompt, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(c->tokens, a->tokens) << "the seed changes nothing: the draws are not seeded";
}

// A `tandem eval` request over `target_dir`: a random drafter `drafter` saved under `scratch`
// /drafter, and two id prompts plus a malformed line (skipped) in `scratch`/prompts.jsonl;
// 12 new tokens per prompt, stopping only at `stop` (not the target's eos, so every prompt
// runs its 12 tokens unless it picks `stop`).
inline SpecEvalRequest TinyEvalRequest(const std::string& target_dir, const DFlashConfig& drafter,
                                       const std::string& scratch, int32_t stop) {
  auto d = DFlashDrafter::Create(drafter, {.max_tokens = 64, .num_blocks = 1},
                                 kernels::HostAllocator(), nullptr);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (d.ok()) {
    RandomizeDrafter(**d, 7);
    EXPECT_TRUE(SaveDFlashCheckpoint(scratch + "/drafter", **d, {0, 7}).ok());
  }
  std::ofstream(scratch + "/prompts.jsonl")
      << "{\"input_ids\": [5, 17, 30, 42, 8]}\n{\"input_ids\": [1, 2, 3]}\nnot json\n";
  SpecEvalRequest q;
  q.target_dir = target_dir;
  q.drafter_dir = scratch + "/drafter";
  q.prompts_file = scratch + "/prompts.jsonl";
  q.skip_bad = true;
  q.max_new_tokens = 12;
  q.stop_token_ids = {stop};
  return q;
}

}  // namespace tandem::models::testing
