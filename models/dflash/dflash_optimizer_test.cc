// The DFlash optimizer's update groups (DFlashUpdateRanges) and the grouped update that the
// overlapped optimizer runs, on the CPU: bitwise the serial update, step after step.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_params.h"
#include "models/dflash/dflash_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

DFlashConfig Qwen3_8bShape() {
  DFlashConfig c = testing::TinyDFlashConfig();
  TransformerConfig& t = c.layers;
  t.vocab_size = 151936;
  t.hidden_size = 4096;
  t.num_hidden_layers = 5;
  t.num_attention_heads = 32;
  t.num_key_value_heads = 8;
  t.head_dim = 128;
  t.rotary_dim = 128;
  t.intermediate_size = 12288;
  t.layer_types.assign(5, LayerType::kFullAttention);
  c.target_layer_ids = {1, 9, 17, 25, 33};
  return c;
}

TEST(DFlashUpdateRangesTest, TileTheBufferInForwardOrder) {
  for (const DFlashConfig& c : {testing::TinyDFlashConfig(), Qwen3_8bShape()}) {
    const DFlashParamLayout layout = MakeDFlashParamLayout(c);
    const int64_t layers = c.layers.num_hidden_layers;
    const std::vector<DFlashUpdateRange> ranges = DFlashUpdateRanges(layout, layers);
    ASSERT_EQ(static_cast<int64_t>(ranges.size()), 2 + layers);
    int last_group = 0;
    for (const DFlashUpdateRange& r : ranges) {
      ASSERT_LT(r.lo, r.hi);
      // Aligned ends: the AdamW kernel takes its float4 path on every element, as serially.
      EXPECT_EQ(r.lo % kDFlashParamAlign, 0) << "range [" << r.lo << ", " << r.hi << ")";
      EXPECT_EQ(r.hi % kDFlashParamAlign, 0) << "range [" << r.lo << ", " << r.hi << ")";
      EXPECT_GE(r.group, last_group) << "groups must come in the forward's order";
      last_group = r.group;
      // Weight decay on exactly [0, matrix_count): no range straddles it.
      EXPECT_EQ(r.weight_decay, r.hi <= layout.matrix_count) << r.lo;
      EXPECT_TRUE(r.hi <= layout.matrix_count || r.lo >= layout.matrix_count) << r.lo;
    }
    // Sorted by start, the ranges tile [0, total): no gap, no overlap.
    std::vector<DFlashUpdateRange> sorted = ranges;
    std::sort(sorted.begin(), sorted.end(),
              [](const DFlashUpdateRange& a, const DFlashUpdateRange& b) { return a.lo < b.lo; });
    EXPECT_EQ(sorted.front().lo, 0);
    for (size_t i = 1; i < sorted.size(); ++i) EXPECT_EQ(sorted[i].lo, sorted[i - 1].hi) << i;
    EXPECT_EQ(sorted.back().hi, layout.total);
    // Every tensor falls in the group the forward waits for before reading it.
    for (const DFlashParamSpec& s : layout.specs) {
      int want = 0;
      if (!s.is_norm && s.name.rfind("layers.", 0) == 0) want = 1 + std::stoi(s.name.substr(7));
      for (const DFlashUpdateRange& r : ranges) {
        if (s.offset >= r.lo && s.offset < r.hi) {
          EXPECT_EQ(r.group, want) << s.name;
          EXPECT_LE(s.offset + s.numel(), r.hi) << s.name << " crosses a range end";
        }
      }
    }
  }
}

// Two tiny CPU drafters from the same parameters, one serial, one with the overlap on (on
// the CPU: the same grouped launches, in order), three steps on a batch with a clipped
// gradient: weights, bf16 copy, m, v and the step counter agree bit for bit.
TEST(DFlashOptimizerOverlapTest, GroupedUpdateIsBitwiseTheSerialOne) {
  const DFlashConfig config = testing::TinyDFlashConfig();
  const int64_t v = config.layers.vocab_size, h = config.layers.hidden_size;
  const testing::HostBatch batch = testing::MakeBatch({24, 20}, v, 11);
  auto anchors = SampleAnchors(batch.meta(), 3, 5, 0);
  ASSERT_TRUE(anchors.ok());
  auto plan = BuildBlockPlan(batch.meta(), *anchors, 4, 16, 63, 7.0);
  ASSERT_TRUE(plan.ok());
  const int64_t t = plan->tokens;
  std::vector<bf16> emb = testing::RandomBf16(v * h, 1.0f, 21),
                    lm = testing::RandomBf16(v * h, 0.3f, 22);
  std::vector<std::vector<bf16>> ctx_host = {testing::RandomBf16(t * h, 1.0f, 30),
                                             testing::RandomBf16(t * h, 1.0f, 31)};
  const DFlashTargetHead head{TensorView(emb.data(), DType::kBF16, Shape{v, h}),
                              TensorView(lm.data(), DType::kBF16, Shape{v, h})};
  std::vector<TensorView> ctx;
  for (auto& c : ctx_host) ctx.emplace_back(c.data(), DType::kBF16, Shape{t, h});
  std::unique_ptr<DFlashDrafter> side[2];
  for (int i = 0; i < 2; ++i) {
    auto d = DFlashDrafter::Create(config, {t, 4, 32}, kernels::HostAllocator(), nullptr);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    side[i] = std::move(*d);
    testing::RandomizeParams(side[i]->params(), 3);
    ASSERT_TRUE(side[i]->SetPlan(*plan).ok());
  }
  ASSERT_TRUE(side[1]->SetOptimizerOverlap(true).ok());
  EXPECT_TRUE(side[1]->optimizer_overlap());
  kernels::AdamWConfig cfg;
  cfg.lr = 3e-3f;
  cfg.weight_decay = 0.1f;
  for (int step = 0; step < 3; ++step) {
    for (auto& d : side) {
      ASSERT_TRUE(d->ForwardBackward(head, ctx, 0.05f, 9, step, true).ok());
      ASSERT_TRUE(d->OptimizerStep(cfg, /*grad_clip=*/0.1f).ok());
    }
    // The clip is active, so the update reads the shared clip scale.
    ASSERT_LT(side[0]->grad_stats().data_as<float>()[kernels::kGradStatsClip], 1.0f);
    EXPECT_EQ(side[0]->loss().data_as<float>()[0], side[1]->loss().data_as<float>()[0]);
  }
  DFlashParams &a = side[0]->params(), &b = side[1]->params();
  using Pair = std::pair<const kernels::Tensor*, const kernels::Tensor*>;
  for (auto [x, y] : std::initializer_list<Pair>{{&a.master, &b.master},
                                                 {&a.compute, &b.compute},
                                                 {&a.adam_m, &b.adam_m},
                                                 {&a.adam_v, &b.adam_v},
                                                 {&a.step, &b.step}}) {
    ASSERT_EQ(x->nbytes(), y->nbytes());
    const auto* px = static_cast<const unsigned char*>(x->data());
    const auto* py = static_cast<const unsigned char*>(y->data());
    EXPECT_EQ(std::memcmp(px, py, x->nbytes()), 0);
  }
  EXPECT_EQ(a.step.view().data_as<int32_t>()[0], 3);
}

}  // namespace
}  // namespace tandem::models
