// Test helpers for measuring tau on the CPU: a Qwen3 target that continues text the way the
// tiny jobs' synthetic data does, so a drafter trained on that data agrees with it.
//
// The synthetic documents follow a fixed permutation of the vocabulary (token i+1 =
// perm[token i], actors/dflash/synthetic_source.h). A random target would not continue a
// prompt the way the data does, so a drafter trained on the data could not agree with it;
// this target is built to know the rule: every layer adds nothing (o_proj and down_proj are
// zero, so the residual stream stays the token embedding) and lm_head[perm[x]] = embed[x], so
// its greedy next token is perm[current token]. What the drafter must learn — perm^j of the
// anchor for j = 1..15 — is the same as in the job it trains in.
//
// Test-only (gtest assertions). Thread-safety: free functions, no shared state.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "actors/dflash/synthetic_source.h"
#include "models/io/hf_config.h"
#include "models/io/safetensors_writer.h"
#include "models/io/weight_spec.h"

namespace tandem::testing {

// The permutation the synthetic data of a job with this vocab and [job] seed follows, read
// off noise-free documents (-1 for a token never seen).
inline std::vector<int32_t> DataPermutation(int64_t vocab, uint64_t seed) {
  dflash::SyntheticOptions o;
  o.vocab = vocab;
  o.noise = 0;
  o.seed = seed;
  o.max_tokens = 256;
  o.batches_per_epoch = 64;
  dflash::SyntheticSource src(o, 0, 1);
  std::vector<int32_t> perm(static_cast<size_t>(vocab), -1);
  for (auto b = src.Next(); b.ok() && b->has_value(); b = src.Next()) {
    const data::TokenBatch& t = **b;
    for (size_t d = 0; d + 1 < t.cu_seqlens.size(); ++d)
      for (int32_t i = t.cu_seqlens[d]; i + 1 < t.cu_seqlens[d + 1]; ++i)
        perm[t.input_ids[i]] = t.input_ids[i + 1];
  }
  return perm;
}

// Writes config.json and model.safetensors of the rule-following target of config `c` into
// `dir`. Use with ASSERT_NO_FATAL_FAILURE.
inline void WriteRuleTarget(const std::string& dir, const models::TransformerConfig& c,
                            const std::vector<int32_t>& perm) {
  ASSERT_EQ(static_cast<int64_t>(perm.size()), c.vocab_size);
  std::ofstream(dir + "/config.json") << models::TransformerConfigToJson(c).dump(2);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<kernels::bf16>> store;
  std::vector<models::TensorToWrite> out;
  const std::vector<models::WeightSpec> specs = models::CausalLmWeightSpecs(c);
  std::vector<kernels::bf16> embed;
  for (const models::WeightSpec& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    std::vector<kernels::bf16> v(static_cast<size_t>(n));
    const bool zero = s.name.find("o_proj") != std::string::npos ||
                      s.name.find("down_proj") != std::string::npos;
    for (auto& x : v)
      x = kernels::bf16(s.shape.size() == 1 ? 1.f : zero ? 0.f : 0.1f * normal(gen));
    if (s.name == "model.embed_tokens.weight") {
      for (auto& x : v) x = kernels::bf16(normal(gen));
      embed = v;
    }
    store.push_back(std::move(v));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == "lm_head.weight") {
      const int64_t h = c.hidden_size;
      for (int64_t x = 0; x < c.vocab_size; ++x)
        std::copy(embed.begin() + x * h, embed.begin() + (x + 1) * h,
                  store[i].begin() + perm[x] * h);
    }
    out.push_back({specs[i].name, kernels::DType::kBF16, specs[i].shape,
                   std::as_bytes(std::span(store[i]))});
  }
  ASSERT_TRUE(models::WriteSafetensors(dir + "/model.safetensors", out).ok());
}

// Writes `count` held-out prompts to DIR/prompts.jsonl and returns its path: rule-following
// starts the job's batches are unlikely to share exactly (other start tokens come from
// another RNG), 8 to 12 tokens each.
inline std::string WriteRulePrompts(const std::string& dir, const std::vector<int32_t>& perm,
                                    int count) {
  const std::string path = dir + "/prompts.jsonl";
  std::ofstream f(path);
  std::mt19937 gen(12345);
  for (int p = 0; p < count; ++p) {
    int32_t tok = static_cast<int32_t>(gen() % perm.size());
    std::vector<int32_t> ids;
    for (int i = 0; i < 8 + p % 5; ++i, tok = perm[tok]) ids.push_back(tok);
    f << fmt::format("{{\"input_ids\": [{}]}}\n", fmt::join(ids, ", "));
  }
  return path;
}

}  // namespace tandem::testing
