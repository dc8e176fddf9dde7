// Test-only fixtures for speculative decoding: a tiny random Qwen3 target (written to a
// scratch checkpoint and loaded) and a tiny DFlash drafter that fits it.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "kernels/random/philox.h"
#include "models/dflash/dflash_drafter.h"
#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3/qwen3_test_util.h"

namespace tandem::models::testing {

// Two full-attention layers over target layers {0, 2} of the tiny 3-layer Qwen3.
inline DFlashConfig TinyDrafterFor(const TransformerConfig& target) {
  DFlashConfig c;
  TransformerConfig& t = c.layers;
  t.model_type = "qwen3";
  t.architectures = {"DFlashDraftModel"};
  t.vocab_size = target.vocab_size;
  t.hidden_size = target.hidden_size;
  t.num_hidden_layers = 2;
  t.num_attention_heads = 4;
  t.num_key_value_heads = 2;
  t.head_dim = 8;
  t.rotary_dim = 8;
  t.intermediate_size = 48;
  t.max_position_embeddings = 4096;
  t.rms_norm_eps = 1e-6;
  t.rope_theta = 10000.0;
  t.layer_types = {LayerType::kFullAttention, LayerType::kFullAttention};
  c.block_size = 16;
  c.mask_token_id = target.vocab_size - 1;
  c.num_target_layers = target.num_hidden_layers;
  c.target_layer_ids = {0, 2};
  return c;
}

struct TinyPair {
  ScratchDir dir;
  TransformerConfig target_config;
  std::unique_ptr<Qwen3Target> target;
  std::unique_ptr<DFlashDrafter> drafter;
};

inline void MakeTinyPair(TinyPair* p, int64_t max_context, uint32_t seed) {
  p->target_config = TinyConfig(false, false);
  ASSERT_TRUE(WriteCheckpoint(p->dir.path(), p->target_config,
                              RandomHostWeights(p->target_config, seed))
                  .ok());
  auto t = Qwen3Target::Load(p->dir.path(), kernels::HostAllocator(), {.max_tokens = 64});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  p->target = std::move(*t);
  auto d = DFlashDrafter::Create(TinyDrafterFor(p->target_config),
                                 {.max_tokens = max_context, .num_blocks = 1},
                                 kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  p->drafter = std::move(*d);
  // Matrices uniform(-0.3, 0.3), norms uniform(0.8, 1.2): drafts that depend on the context.
  DFlashParams& params = p->drafter->params();
  std::vector<float> host(params.layout.total);
  for (const DFlashParamSpec& s : params.layout.specs)
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i) {
      const float u = 2 * kernels::PhiloxUniform(seed, 9, i) - 1;
      host[i] = s.is_norm ? 1.0f + 0.2f * u : 0.3f * u;
    }
  ASSERT_TRUE(kernels::CopyFromHost(params.master, host.data(), nullptr).ok());
  ASSERT_TRUE(params.SyncCompute(nullptr).ok());
}

}  // namespace tandem::models::testing
