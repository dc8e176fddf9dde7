// Test-only fixtures for the DFlash drafter tests: a tiny config (one sliding and one full
// layer), a packed batch of documents with a prompt-masked loss, random target head and
// context layers, and non-trivial parameters.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/memory.h"
#include "kernels/random/philox.h"
#include "models/dflash/dflash_anchors.h"
#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_drafter.h"

namespace tandem::models::testing {

inline DFlashConfig TinyDFlashConfig() {
  DFlashConfig c;
  TransformerConfig& t = c.layers;
  t.model_type = "qwen3";
  t.architectures = {"DFlashDraftModel"};
  t.vocab_size = 64;
  t.hidden_size = 32;
  t.num_hidden_layers = 2;
  t.num_attention_heads = 4;
  t.num_key_value_heads = 2;
  t.head_dim = 8;
  t.rotary_dim = 8;
  t.intermediate_size = 48;
  t.max_position_embeddings = 4096;
  t.rms_norm_eps = 1e-6;
  t.rope_theta = 10000.0;
  t.layer_types = {LayerType::kSlidingAttention, LayerType::kFullAttention};
  t.sliding_window = 6;
  c.block_size = 16;
  c.mask_token_id = 63;
  c.num_target_layers = 8;
  c.target_layer_ids = {1, 5};
  return c;
}

// A tiny DFlash2 drafter: H = 64, 2 layers (sliding with a window of the whole block, then
// full; both bidirectional in the block), V = 97, K = 2 taps, groups of 4 channels, selector
// rank 8 over the top 5.
inline DFlashConfig TinyDFlash2Config() {
  DFlashConfig c = TinyDFlashConfig();
  TransformerConfig& t = c.layers;
  t.architectures = {"DFlash2DraftModel"};
  t.vocab_size = 97;
  t.hidden_size = 64;
  t.head_dim = 16;
  t.rotary_dim = 16;
  t.intermediate_size = 96;
  t.sliding_window = 16;
  c.mask_token_id = 96;
  c.is_causal = false;
  DFlash2Extension e;
  e.conv_kernel_size = 2;
  e.conv_group_size = 4;
  e.selector_rank = 8;
  e.selector_top_k = 5;
  c.dflash2 = e;
  return c;
}

// Host data of a packed batch: documents of the given lengths, the first 3 tokens of every
// document are prompt (loss mask 0).
struct HostBatch {
  std::vector<int32_t> ids, pos, cu{0};
  std::vector<uint8_t> mask;
  PackedBatchMeta meta() const { return {ids, pos, cu, mask}; }
};

inline HostBatch MakeBatch(const std::vector<int32_t>& lengths, int64_t vocab, uint64_t seed) {
  HostBatch b;
  uint64_t i = 0;
  for (int32_t len : lengths) {
    for (int32_t p = 0; p < len; ++p, ++i) {
      b.ids.push_back(static_cast<int32_t>(kernels::PhiloxUniform(seed, 1, i) * (vocab - 1)));
      b.pos.push_back(p);
      b.mask.push_back(p >= 3 ? 1 : 0);
    }
    b.cu.push_back(static_cast<int32_t>(b.ids.size()));
  }
  return b;
}

// bf16 host values uniform in [-a, a).
inline std::vector<kernels::bf16> RandomBf16(int64_t n, float a, uint64_t seed) {
  std::vector<kernels::bf16> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = kernels::bf16(a * (2 * kernels::PhiloxUniform(seed, 7, i) - 1));
  return v;
}

// Master weights: matrices uniform(-0.3, 0.3) (large enough for non-trivial attention),
// norms uniform(0.8, 1.2); compute copy synced.
inline void RandomizeParams(DFlashParams& p, uint64_t seed) {
  std::vector<float> host(p.layout.total);
  for (const DFlashParamSpec& s : p.layout.specs)
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i) {
      const float u = 2 * kernels::PhiloxUniform(seed, 9, i) - 1;
      host[i] = s.is_norm ? 1.0f + 0.2f * u : 0.3f * u;
    }
  ASSERT_TRUE(kernels::CopyFromHost(p.master, host.data(), nullptr).ok());
  ASSERT_TRUE(p.SyncCompute(nullptr).ok());
}

// Non-trivial DFlash2 weights at a scale a trained drafter has (any device): RandomizeParams'
// values, then base kernels near the identity (tap 0 around 1, other taps around 0, +-0.3)
// and small kernel projections (+-0.05).
inline void RandomizeDFlash2Params(DFlashParams& p, uint64_t seed) {
  std::vector<float> host(p.layout.total);
  for (const DFlashParamSpec& s : p.layout.specs) {
    const bool base = s.name.ends_with("base_kernel");
    const bool proj = s.name.ends_with("kernel_projection.weight");
    const int64_t h = s.shape.back();
    for (int64_t j = 0; j < s.numel(); ++j) {
      const int64_t i = s.offset + j;
      const float u = 2 * kernels::PhiloxUniform(seed, 9, i) - 1;
      const float w = 2 * kernels::PhiloxUniform(seed, 13, i) - 1;
      if (base) {
        host[i] = ((j / h) % s.shape[1] == 0 ? 1.0f : 0.0f) + 0.3f * w;
      } else if (proj) {
        host[i] = 0.05f * w;
      } else {
        host[i] = s.is_norm ? 1.0f + 0.2f * u : 0.3f * u;
      }
    }
  }
  ASSERT_TRUE(kernels::CopyFromHost(p.master, host.data(), nullptr).ok());
  ASSERT_TRUE(p.SyncCompute(nullptr).ok());
}

}  // namespace tandem::models::testing
