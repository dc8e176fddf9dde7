// Warm start on the CPU: a drafter exported by tandem (the layout of a released one) is
// loaded into a fresh drafter bit for bit; a config that differs is reported by key, a
// drafter for another target as such, and a tensor of another shape by name.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_trainer.h"
#include "models/dflash/dflash_test_util.h"
#include "models/dflash/dflash_warm_start.h"
#include "models/io/model_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

std::unique_ptr<DFlashTrainer> NewTrainer(const DFlashConfig& c, uint64_t seed) {
  DFlashTrainOptions o;
  o.max_tokens = 64;
  o.anchors_per_batch = 4;
  o.total_steps = 10;
  o.lr = 1e-2f;
  o.seed = seed;
  o.ce_chunk_rows = 16;
  auto t = DFlashTrainer::Create(c, o, kernels::HostAllocator(), nullptr);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return nullptr;
  EXPECT_TRUE((*t)->drafter().params().InitFromScratch(seed, nullptr).ok());
  return std::move(*t);
}

// Two training steps, so the exported weights are not an init any seed would give.
void Train(DFlashTrainer& t, const DFlashConfig& c) {
  const int64_t v = c.layers.vocab_size, h = c.layers.hidden_size;
  const testing::HostBatch batch = testing::MakeBatch({30, 18}, v, 4);
  std::vector<bf16> emb = testing::RandomBf16(v * h, 1.0f, 1), lm = testing::RandomBf16(v * h, 0.3f, 2);
  std::vector<std::vector<bf16>> ctx_host;
  std::vector<TensorView> ctx;
  for (int i = 0; i < 2; ++i) ctx_host.push_back(testing::RandomBf16(48 * h, 1.0f, 3 + i));
  for (auto& x : ctx_host) ctx.emplace_back(x.data(), DType::kBF16, Shape{48, h});
  const DFlashTargetHead head{TensorView(emb.data(), DType::kBF16, Shape{v, h}),
                              TensorView(lm.data(), DType::kBF16, Shape{v, h})};
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(t.Step(head, batch.meta(), ctx).ok());
}

bool SameBytes(const TensorView& a, const TensorView& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(DFlashWarmStartTest, ExportThenInitFromIsBitwise) {
  DFlashConfig c = testing::TinyDFlashConfig();
  c.is_causal = true;  // the mask rule travels with the export
  testing::ScratchDir dir;
  auto a = NewTrainer(c, 1);
  ASSERT_NE(a, nullptr);
  Train(*a, c);
  ASSERT_TRUE(SaveDFlashCheckpoint(dir.path(), a->drafter(), a->state()).ok());

  auto loaded = LoadDFlashConfig(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto m = FindDFlashConfigMismatch(*loaded, c);
  EXPECT_FALSE(m.has_value()) << m->key << ": " << m->have << " vs " << m->want;
  auto b = NewTrainer(c, 2);
  ASSERT_NE(b, nullptr);
  ASSERT_FALSE(SameBytes(a->drafter().params().compute, b->drafter().params().compute));
  ASSERT_TRUE(LoadDFlashWeights(dir.path(), b->drafter()).ok());
  EXPECT_TRUE(SameBytes(a->drafter().params().compute, b->drafter().params().compute));
  // A fresh optimizer: no AdamW step taken yet.
  EXPECT_EQ(b->drafter().params().step.view().data_as<int32_t>()[0], 0);
}

TEST(DFlashWarmStartTest, ConfigMismatchesAreNamed) {
  const DFlashConfig want = testing::TinyDFlashConfig();
  struct Case {
    const char* key;
    bool other_target;
    void (*edit)(DFlashConfig&);
  };
  const Case cases[] = {
      {"vocab_size", true, [](DFlashConfig& c) { c.layers.vocab_size = 128; }},
      {"hidden_size", true, [](DFlashConfig& c) { c.layers.hidden_size = 64; }},
      {"num_hidden_layers", false, [](DFlashConfig& c) {
         c.layers.num_hidden_layers = 3;
         c.layers.layer_types.push_back(LayerType::kFullAttention);
       }},
      {"intermediate_size", false, [](DFlashConfig& c) { c.layers.intermediate_size = 96; }},
      {"sliding_window", false, [](DFlashConfig& c) { c.layers.sliding_window = 2048; }},
      {"is_causal", false, [](DFlashConfig& c) { c.is_causal = true; }},
      {"dflash_config.mask_token_id", false, [](DFlashConfig& c) { c.mask_token_id = 5; }},
      {"dflash_config.target_layer_ids", false, [](DFlashConfig& c) { c.target_layer_ids = {2, 5}; }},
      {"rope_theta", false, [](DFlashConfig& c) { c.layers.rope_theta = 1e6; }},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.key);
    DFlashConfig have = want;
    k.edit(have);
    const auto m = FindDFlashConfigMismatch(have, want);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->key, k.key);
    EXPECT_EQ(m->other_target, k.other_target);
    EXPECT_NE(m->have, m->want);
  }
}

// A config that agrees over weights of another shape: the load names the tensor.
TEST(DFlashWarmStartTest, TensorOfAnotherShapeIsNamed) {
  const DFlashConfig c = testing::TinyDFlashConfig();
  DFlashConfig wider = c;
  wider.layers.intermediate_size = 96;
  testing::ScratchDir dir;
  auto a = NewTrainer(wider, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(SaveDFlashCheckpoint(dir.path(), a->drafter(), a->state()).ok());
  ASSERT_TRUE(WriteDFlashConfig(dir.File("config.json"), c).ok());
  auto b = NewTrainer(c, 2);
  ASSERT_NE(b, nullptr);
  const Status st = LoadDFlashWeights(dir.path(), b->drafter());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layers.0.mlp.gate_proj.weight"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tandem::models
