// CPU tests of the Qwen3 target with precision = "fp8" (the FP8 reference kernels): on a
// tiny random checkpoint the fp8 forward stays close to the bf16 one (but is not it), with a
// token count that is not a multiple of 4 (padded FP8 rows); the projections' memory
// shrinks; quantizing layer by layer at load equals quantizing after it; a bad precision
// name is refused.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3/qwen3_test_util.h"
#include "models/qwen3/qwen3_weights_internal.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::TensorView;

std::vector<std::vector<bf16>> RunCaptures(Qwen3Target& target, testing::HostBatch& b) {
  const int64_t t = static_cast<int64_t>(b.ids.size()), h = target.config().hidden_size;
  std::vector<std::vector<bf16>> hidden(3, std::vector<bf16>(t * h));
  std::vector<LayerCapture> caps;
  for (int l = 0; l < 3; ++l) caps.push_back({l, TensorView(hidden[l].data(), DType::kBF16, {t, h})});
  PackedBatch pb{TensorView(b.ids.data(), DType::kI32, {t}),
                 TensorView(b.pos.data(), DType::kI32, {t}),
                 TensorView(b.cu.data(), DType::kI32, {static_cast<int64_t>(b.cu.size())}),
                 b.max_seqlen};
  Status st = target.Forward(pb, caps);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return hidden;
}

TEST(Qwen3Fp8Test, Fp8ForwardTracksBf16) {
  const TransformerConfig cfg = testing::TinyConfig(false, false);
  const testing::HostWeights w = testing::RandomHostWeights(cfg, 11);
  testing::ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  auto bf = Qwen3Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = 40});
  auto f8 = Qwen3Target::Load(dir.path(), kernels::HostAllocator(),
                              {.max_tokens = 40, .precision = TargetPrecision::kFp8});
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  ASSERT_TRUE(f8.ok()) << f8.status().ToString();
  EXPECT_LT((*f8)->weight_bytes(), (*bf)->weight_bytes());
  EXPECT_FALSE((*f8)->weights().has_projections());
  testing::HostBatch b = testing::MakeBatch({5, 11, 1, 6}, cfg.vocab_size, 3);  // 23 tokens
  const auto want = RunCaptures(**bf, b);
  const auto got = RunCaptures(**f8, b);
  for (int l = 0; l < 3; ++l) {
    double rel = 0, min_cos = 0;
    testing::RelL2AndMinCos(got[l], want[l], cfg.hidden_size, &rel, &min_cos);
    // e4m3 keeps 3 mantissa bits (2^-4 relative per element, averaging down over K); over
    // three layers the captures stay within a few percent of bf16. A forward that ignored
    // the fp8 path would give rel == 0.
    EXPECT_GT(rel, 1e-4) << "layer " << l;
    EXPECT_LT(rel, 0.08) << "layer " << l;
    EXPECT_GT(min_cos, 0.99) << "layer " << l;
  }
}

// Load and Random quantize each layer as it arrives (Qwen3Weights' ProjectionSink); the
// result must be the forward of quantizing the complete bf16 weights afterwards, bit for bit.
TEST(Qwen3Fp8Test, LayerByLayerQuantizeEqualsQuantizeAfterLoad) {
  const TransformerConfig cfg = testing::TinyConfig(false, false);
  const testing::HostWeights w = testing::RandomHostWeights(cfg, 12);
  testing::ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  const Qwen3TargetOptions fp8{.max_tokens = 40, .precision = TargetPrecision::kFp8};
  auto streamed = Qwen3Target::Load(dir.path(), kernels::HostAllocator(), fp8);
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  auto reader = SafetensorsReader::Open(dir.path());
  ASSERT_TRUE(reader.ok());
  auto whole = Qwen3Weights::Load(cfg, *reader, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_TRUE(whole->has_projections());
  auto after = Qwen3Target::Create(std::move(*whole), fp8);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  // Same tensors; the two layouts of the remaining bf16 weights differ only in alignment
  // padding (256 bytes at most per tensor).
  EXPECT_FALSE((*streamed)->weights().has_projections());
  EXPECT_LE(std::abs((*streamed)->weight_bytes() - (*after)->weight_bytes()),
            256 * (3 + 4 * cfg.num_hidden_layers));
  testing::HostBatch b = testing::MakeBatch({7, 9, 2}, cfg.vocab_size, 5);
  const auto got = RunCaptures(**streamed, b), want = RunCaptures(**after, b);
  for (int l = 0; l < 3; ++l)
    for (size_t i = 0; i < got[l].size(); ++i)
      ASSERT_EQ(got[l][i].bits, want[l][i].bits) << "layer " << l << " element " << i;

  auto random_streamed = Qwen3Target::Random(cfg, kernels::HostAllocator(), 3, fp8);
  ASSERT_TRUE(random_streamed.ok()) << random_streamed.status().ToString();
  auto random_whole = Qwen3Weights::Random(cfg, kernels::HostAllocator(), 3, nullptr);
  ASSERT_TRUE(random_whole.ok());
  auto random_after = Qwen3Target::Create(std::move(*random_whole), fp8);
  ASSERT_TRUE(random_after.ok()) << random_after.status().ToString();
  const auto rg = RunCaptures(**random_streamed, b), rw = RunCaptures(**random_after, b);
  for (int l = 0; l < 3; ++l)
    for (size_t i = 0; i < rg[l].size(); ++i)
      ASSERT_EQ(rg[l][i].bits, rw[l][i].bits) << "random, layer " << l << " element " << i;
}

// The validation's memory bound for the workspace is what Create allocates, in both
// precisions and for a max_tokens that is not a multiple of the FP8 row padding.
TEST(Qwen3Fp8Test, WorkspaceBytesIsWhatCreateAllocates) {
  const TransformerConfig cfg = testing::TinyConfig(false, false);
  for (const TargetPrecision p : {TargetPrecision::kBf16, TargetPrecision::kFp8}) {
    Qwen3TargetOptions o;
    o.max_tokens = 37;
    o.precision = p;
    auto t = Qwen3Target::Random(cfg, kernels::HostAllocator(), 3, o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ((*t)->workspace_bytes(), Qwen3Target::WorkspaceBytes(cfg, 37, p));
  }
  EXPECT_GT(Qwen3Target::WorkspaceBytes(cfg, 37, TargetPrecision::kFp8),
            Qwen3Target::WorkspaceBytes(cfg, 37, TargetPrecision::kBf16));
}

TEST(Qwen3Fp8Test, ProjectionNamesAndIncompleteLayers) {
  auto p = ParseProjectionName("model.layers.17.mlp.up_proj.weight");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->layer, 17);
  EXPECT_EQ(p->kind, 5);
  EXPECT_FALSE(ParseProjectionName("model.layers.3.input_layernorm.weight").has_value());
  EXPECT_FALSE(ParseProjectionName("model.layers.x.mlp.up_proj.weight").has_value());
  EXPECT_FALSE(ParseProjectionName("lm_head.weight").has_value());
  // A layer whose projections never all arrive is named by CheckComplete, and the sink
  // never sees it.
  const TransformerConfig cfg = testing::TinyConfig(false, false);
  int calls = 0;
  const ProjectionSink sink = [&](int64_t, const Qwen3LayerWeights&, kernels::Stream) {
    ++calls;
    return Status::Ok();
  };
  ProjectionStaging staging(cfg, kernels::HostAllocator(), sink, nullptr);
  for (int k = 0; k < kProjectionsPerLayer; ++k) {
    const ProjectionName n{0, k};
    ASSERT_TRUE(staging.Destination(n).ok());
    ASSERT_TRUE(staging.Arrived(n).ok());
  }
  ASSERT_TRUE(staging.Destination({1, 2}).ok());
  ASSERT_TRUE(staging.Arrived({1, 2}).ok());
  EXPECT_EQ(calls, 1);
  const Status st = staging.CheckComplete();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("model.layers.1: 1 of its 7"), std::string::npos) << st.ToString();
  EXPECT_FALSE(staging.Destination({0, 3}).ok()) << "a tensor after its layer was complete";
  EXPECT_FALSE(staging.Destination({cfg.num_hidden_layers, 0}).ok());
}

TEST(Qwen3Fp8Test, RejectsUnknownPrecision) {
  EXPECT_FALSE(ParseTargetPrecision("fp4").ok());
  EXPECT_EQ(*ParseTargetPrecision("fp8"), TargetPrecision::kFp8);
}

}  // namespace
}  // namespace tandem::models
