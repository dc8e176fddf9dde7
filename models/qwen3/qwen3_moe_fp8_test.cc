// CPU tests of a Qwen3-MoE target loaded with precision = "fp8" layer by layer (the FP8
// reference kernels): staging each layer's attention projections and routed experts and
// quantizing them as the layer completes gives bit for bit the forward of quantizing the whole
// bf16 model after loading, in both expert layouts and for random weights; the load never
// holds every layer's bf16 experts at once (the allocator's high-water mark); the staging's
// names, duplicates and incomplete layers.
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/memory.h"
#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_fp8.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3/qwen3_test_util.h"
#include "models/qwen3/qwen3_weights_internal.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::TensorView;
using testing::HostBatch;
using testing::ScratchDir;

// Every layer's capture and the logits of `target` on `b`, as raw bf16 / f32 bits.
std::vector<uint32_t> ForwardBits(Qwen3Target& target, HostBatch& b) {
  const TransformerConfig& c = target.config();
  const int64_t t = static_cast<int64_t>(b.ids.size()), h = c.hidden_size;
  std::vector<std::vector<bf16>> hidden(c.num_hidden_layers, std::vector<bf16>(t * h));
  std::vector<LayerCapture> caps;
  for (int l = 0; l < c.num_hidden_layers; ++l)
    caps.push_back({l, TensorView(hidden[l].data(), DType::kBF16, {t, h})});
  std::vector<float> logits(t * c.vocab_size);
  const Status st = target.Forward(testing::HostPacked(b), caps,
                                   TensorView(logits.data(), DType::kF32, {t, c.vocab_size}));
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<uint32_t> bits;
  for (const auto& layer : hidden)
    for (bf16 x : layer) bits.push_back(x.bits);
  for (float x : logits) bits.push_back(std::bit_cast<uint32_t>(x));
  return bits;
}

const Qwen3TargetOptions kFp8{.max_tokens = 40, .precision = TargetPrecision::kFp8};

// The first index where two forwards differ (-1 when they are the same bits).
int64_t FirstDifference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return -1;
}

TEST(Qwen3MoeFp8Test, StagedLoadEqualsQuantizeAfterLoad) {
  const TransformerConfig cfg = testing::TinyMoeConfig();
  const testing::HostWeights w = testing::RandomHostWeights(cfg, 31);
  HostBatch b = testing::MakeBatch({7, 9, 3}, cfg.vocab_size, 5);  // 19 tokens
  std::vector<uint32_t> per_expert_bits;
  for (const ExpertLayout layout : {ExpertLayout::kPerExpert, ExpertLayout::kFused}) {
    SCOPED_TRACE(layout == ExpertLayout::kFused ? "fused experts" : "per-expert tensors");
    ScratchDir dir;
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w, layout).ok());
    auto staged = Qwen3Target::Load(dir.path(), kernels::HostAllocator(), kFp8);
    ASSERT_TRUE(staged.ok()) << staged.status().ToString();
    // The staged weights never held the projections or the experts; the routers are there.
    EXPECT_FALSE((*staged)->weights().has_projections());
    EXPECT_TRUE((*staged)->weights().layers()[2].moe.experts.gate_up.empty());
    EXPECT_FALSE((*staged)->weights().layers()[2].moe.router.empty());

    auto reader = SafetensorsReader::Open(dir.path());
    ASSERT_TRUE(reader.ok());
    auto whole = Qwen3Weights::Load(cfg, *reader, kernels::HostAllocator(), nullptr);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    ASSERT_FALSE(whole->layers()[0].moe.experts.gate_up.empty());
    auto after = Qwen3Target::Create(std::move(*whole), kFp8);  // Quantize at Create
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    EXPECT_EQ((*staged)->fp8_projections().nbytes(), (*after)->fp8_projections().nbytes());

    const std::vector<uint32_t> got = ForwardBits(**staged, b), want = ForwardBits(**after, b);
    EXPECT_EQ(FirstDifference(got, want), -1);
    if (layout == ExpertLayout::kPerExpert) per_expert_bits = got;
    else EXPECT_EQ(FirstDifference(got, per_expert_bits), -1) << "the layouts disagree";
  }
  // The check can fail: another model's weights give other bits.
  ScratchDir other_dir;
  ASSERT_TRUE(
      testing::WriteCheckpoint(other_dir.path(), cfg, testing::RandomHostWeights(cfg, 32)).ok());
  auto other = Qwen3Target::Load(other_dir.path(), kernels::HostAllocator(), kFp8);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_NE(FirstDifference(ForwardBits(**other, b), per_expert_bits), -1);
}

TEST(Qwen3MoeFp8Test, StagedRandomEqualsQuantizeAfterRandom) {
  const TransformerConfig cfg = testing::TinyMoeConfig();
  auto staged = Qwen3Target::Random(cfg, kernels::HostAllocator(), 7, kFp8);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_FALSE((*staged)->weights().has_projections());
  auto whole = Qwen3Weights::Random(cfg, kernels::HostAllocator(), 7, nullptr);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto after = Qwen3Target::Create(std::move(*whole), kFp8);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  HostBatch b = testing::MakeBatch({11, 4}, cfg.vocab_size, 8);
  EXPECT_EQ(FirstDifference(ForwardBits(**staged, b), ForwardBits(**after, b)), -1);
}

// Six layers (five MoE) of 32 experts: the staged load's transient memory (its high-water
// mark above what it keeps) is one layer's staging buffer, far below every layer's bf16
// experts, which a bf16 load holds at once. The test checkpoints store o_proj in f32, which
// the writer puts before every bf16 tensor: read in file order, every layer's buffer would
// open at the start.
TEST(Qwen3MoeFp8Test, LoadHoldsOneLayersBf16ExpertsAtATime) {
  TransformerConfig cfg = testing::TinyMoeConfig();
  cfg.num_hidden_layers = 6;
  cfg.layer_types.assign(6, LayerType::kFullAttention);
  cfg.moe->num_experts = 32;
  cfg.moe->moe_intermediate_size = 48;
  const int64_t layer_experts = 32 * 3 * 48 * cfg.hidden_size * 2, moe_layers = 5;
  ASSERT_GT(Qwen3Weights::StagingBytes(cfg), layer_experts);
  ASSERT_LT(Qwen3Weights::StagingBytes(cfg), layer_experts + 4 * 4096);
  const testing::HostWeights w = testing::RandomHostWeights(cfg, 33);
  for (const ExpertLayout layout : {ExpertLayout::kPerExpert, ExpertLayout::kFused}) {
    SCOPED_TRACE(layout == ExpertLayout::kFused ? "fused experts" : "per-expert tensors");
    ScratchDir dir;
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w, layout).ok());
    auto reader = SafetensorsReader::Open(dir.path());
    ASSERT_TRUE(reader.ok());

    kernels::CpuAllocator alloc;  // its own stats
    auto fp8 = Qwen3Fp8Projections::Allocate(cfg, alloc, nullptr);
    ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
    int layers = 0;
    auto staged = Qwen3Weights::Load(
        cfg, *reader, alloc, nullptr,
        [&](int64_t layer, const Qwen3LayerWeights& v, kernels::Stream s) {
          ++layers;
          EXPECT_EQ(v.moe.experts.gate_up.empty(), !cfg.IsMoeLayer(layer)) << layer;
          return fp8->QuantizeLayer(layer, v, s);
        });
    ASSERT_TRUE(staged.ok()) << staged.status().ToString();
    EXPECT_EQ(layers, cfg.num_hidden_layers);
    const kernels::AllocatorStats st = alloc.stats();
    EXPECT_EQ(st.in_use_bytes, (staged->nbytes() + 4095) / 4096 * 4096 +
                                   (fp8->nbytes() + 4095) / 4096 * 4096)
        << "the load keeps the resident weights and the e4m3 form only";
    const int64_t transient = st.high_water_in_use - st.in_use_bytes;
    EXPECT_GE(transient, layer_experts) << "a layer's experts were staged in bf16";
    EXPECT_LE(transient, (Qwen3Weights::StagingBytes(cfg) + 4095) / 4096 * 4096);
    EXPECT_LT(st.high_water_in_use, st.in_use_bytes + moe_layers * layer_experts / 2);

    kernels::CpuAllocator whole_alloc;  // the bf16 load holds every layer's experts
    auto whole = Qwen3Weights::Load(cfg, *reader, whole_alloc, nullptr);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    EXPECT_GT(whole_alloc.stats().high_water_in_use,
              staged->nbytes() + moe_layers * layer_experts);
  }
}

// A MoE layer stages its four attention projections and 3 E expert tensors (per-expert
// layout); other layouts' and the dense MLP's names are not staged there; a duplicate, an
// unknown expert and an incomplete layer are errors naming the tensor.
TEST(Qwen3MoeFp8Test, StagingNamesDuplicatesAndIncompleteLayers) {
  auto p = ParseProjectionName("model.layers.2.mlp.experts.13.up_proj.weight");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->layer, 2);
  EXPECT_EQ(p->kind, kExpertUp);
  EXPECT_EQ(p->expert, 13);
  p = ParseProjectionName("model.layers.4.mlp.experts.gate_up_proj");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->kind, kFusedGateUp);
  EXPECT_EQ(ParseProjectionName("model.layers.4.mlp.experts.down_proj")->kind, kFusedDown);
  EXPECT_FALSE(ParseProjectionName("model.layers.2.mlp.gate.weight").has_value());  // router
  EXPECT_FALSE(ParseProjectionName("model.layers.2.mlp.experts.x.up_proj.weight").has_value());
  EXPECT_FALSE(ParseProjectionName("model.layers.2.mlp.experts.1.up_proj").has_value());

  const TransformerConfig cfg = testing::TinyMoeConfig();  // 6 experts; layer 1 dense
  const int64_t e = 6, i = 16, h = cfg.hidden_size;
  std::vector<int64_t> sunk;
  const ProjectionSink sink = [&](int64_t layer, const Qwen3LayerWeights& v, kernels::Stream) {
    sunk.push_back(layer);
    EXPECT_EQ(v.moe.experts.gate_up.shape(), (kernels::Shape{e, 2 * i, h}));
    EXPECT_EQ(v.moe.experts.down.shape(), (kernels::Shape{e, h, i}));
    EXPECT_TRUE(v.gate_up.empty());
    return Status::Ok();
  };
  ProjectionStaging staging(cfg, kernels::HostAllocator(), sink, nullptr);
  // Not staged in a per-expert MoE layer: a fused tensor, a dense MLP tensor.
  for (const ProjectionName n : {ProjectionName{0, kFusedGateUp}, ProjectionName{0, 4}}) {
    auto v = staging.Destination(n);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_TRUE(v->empty());
  }
  auto far = staging.Destination({0, kExpertDown, e});
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().ToString().find("model.layers.0.mlp.experts.6: the config has 6"),
            std::string::npos) << far.status().ToString();
  // Expert 3's up rows sit at rows [I, 2I) of its [2I, H] block.
  auto up = staging.Destination({0, kExpertUp, 3});
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->shape(), (kernels::Shape{i, h}));
  ASSERT_TRUE(staging.Arrived({0, kExpertUp, 3}).ok());
  auto twice = staging.Destination({0, kExpertUp, 3});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().ToString().find("model.layers.0.mlp.experts.3.up_proj.weight: "
                                           "arrived twice"),
            std::string::npos) << twice.status().ToString();
  for (int k = 0; k < kAttentionProjections; ++k) {
    ASSERT_TRUE(staging.Destination({0, k}).ok());
    ASSERT_TRUE(staging.Arrived({0, k}).ok());
  }
  for (int64_t x = 0; x < e; ++x)
    for (int kind : {kExpertGate, kExpertUp, kExpertDown}) {
      if (x == 3 && kind == kExpertUp) continue;
      ASSERT_TRUE(staging.Destination({0, kind, x}).ok());
      if (x == 5 && kind == kExpertDown) continue;  // the last one: not yet
      ASSERT_TRUE(staging.Arrived({0, kind, x}).ok());
    }
  EXPECT_TRUE(sunk.empty());
  Status st = staging.CheckComplete();
  EXPECT_NE(st.ToString().find("model.layers.0: 21 of its 22 projection weights were read "
                               "('model.layers.0.mlp.experts.5.down_proj.weight' is missing)"),
            std::string::npos) << st.ToString();
  ASSERT_TRUE(staging.Arrived({0, kExpertDown, 5}).ok());
  EXPECT_EQ(sunk, std::vector<int64_t>{0});
  EXPECT_FALSE(staging.Destination({0, kExpertGate, 0}).ok()) << "after the layer was complete";
  // The dense layer stages its MLP, not experts.
  EXPECT_TRUE(staging.Destination({1, kExpertGate, 0})->empty());
  EXPECT_FALSE(staging.Destination({1, 4})->empty());
  EXPECT_EQ(staging.ExpectedTensors(), 2 * (4 + 3 * e) + kProjectionsPerLayer);

  ProjectionStaging fused(cfg, kernels::HostAllocator(), sink, nullptr, ExpertLayout::kFused);
  EXPECT_TRUE(fused.Destination({0, kExpertGate, 0})->empty());
  EXPECT_EQ(fused.Destination({0, kFusedGateUp})->shape(), (kernels::Shape{e, 2 * i, h}));
  EXPECT_EQ(fused.ExpectedTensors(), 2 * (4 + 2) + kProjectionsPerLayer);
}

}  // namespace
}  // namespace tandem::models
