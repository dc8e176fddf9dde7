// CPU tests of the Qwen3-MoE target (model_type qwen3_moe): the bf16 forward against the
// float64 reference with MoE layers and a dense one (mlp_only_layers), both expert layouts
// loading the same model, the workspace bound, and the loader's errors (a missing expert
// tensor, an expert count that disagrees with config.json), and precision = "fp8" (experts in
// e4m3) tracking bf16.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/testing/testing.h"
#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3/qwen3_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::TensorView;
using kernels::testing::AllClose;
using testing::HostBatch;
using testing::HostWeights;
using testing::ScratchDir;

// Captures every layer of `target` on batch `b`; the logits go to `logits`.
std::vector<std::vector<bf16>> RunAll(Qwen3Target& target, HostBatch& b,
                                      std::vector<float>* logits) {
  const TransformerConfig& c = target.config();
  const int64_t t = static_cast<int64_t>(b.ids.size()), h = c.hidden_size;
  std::vector<std::vector<bf16>> hidden(c.num_hidden_layers, std::vector<bf16>(t * h));
  std::vector<LayerCapture> caps;
  for (int l = 0; l < c.num_hidden_layers; ++l)
    caps.push_back({l, TensorView(hidden[l].data(), DType::kBF16, {t, h})});
  logits->assign(t * c.vocab_size, 0.f);
  const Status st = target.Forward(testing::HostPacked(b), caps,
                                   TensorView(logits->data(), DType::kF32, {t, c.vocab_size}));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return hidden;
}

TEST(Qwen3MoeTargetTest, MatchesFloat64Reference) {
  const TransformerConfig cfg = testing::TinyMoeConfig();
  ASSERT_TRUE(cfg.IsMoeLayer(0) && !cfg.IsMoeLayer(1) && cfg.IsMoeLayer(2));
  const HostWeights w = testing::RandomHostWeights(cfg, 17);
  ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  auto target = Qwen3Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = 40});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ((*target)->workspace_bytes(), Qwen3Target::WorkspaceBytes(cfg, 40));

  HostBatch b = testing::MakeBatch({5, 11, 1, 7}, cfg.vocab_size, 3);
  std::vector<float> logits;
  const std::vector<std::vector<bf16>> hidden = RunAll(**target, b, &logits);
  const testing::RefOutputs ref = testing::ReferenceForward(cfg, w, b);
  for (int l = 0; l < 3; ++l) {
    const std::vector<double> got = testing::ToDouble(hidden[l]);
    EXPECT_TRUE(AllClose(got, ref.hidden[l], testing::kAtol * testing::Rms(ref.hidden[l]),
                         testing::kRtol, "hidden." + std::to_string(l)));
    EXPECT_LT(testing::RelL2(got, ref.hidden[l]), testing::kRelL2) << "layer " << l;
  }
  const std::vector<double> got_logits(logits.begin(), logits.end());
  EXPECT_LT(testing::RelL2(got_logits, ref.logits), testing::kRelL2);

  // Sensitivity: without renormalising the top-k weights the reference moves far outside the
  // tolerance (at 4x; the residual stream carries the embedding), so the check above would
  // catch a router that ignores norm_topk_prob.
  TransformerConfig unnormalised = cfg;
  unnormalised.moe->norm_topk_prob = false;
  const testing::RefOutputs other = testing::ReferenceForward(unnormalised, w, b);
  EXPECT_GT(testing::RelL2(other.hidden[2], ref.hidden[2]), 4 * testing::kRelL2);
  EXPECT_GT(testing::RelL2(other.logits, ref.logits), 4 * testing::kRelL2);
}

TEST(Qwen3MoeTargetTest, FusedAndPerExpertLayoutsAreTheSameModel) {
  const TransformerConfig cfg = testing::TinyMoeConfig();
  const HostWeights w = testing::RandomHostWeights(cfg, 18);
  ScratchDir per_expert, fused;
  ASSERT_TRUE(testing::WriteCheckpoint(per_expert.path(), cfg, w).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(fused.path(), cfg, w, ExpertLayout::kFused).ok());
  auto a = Qwen3Target::Load(per_expert.path(), kernels::HostAllocator(), {.max_tokens = 16});
  auto f = Qwen3Target::Load(fused.path(), kernels::HostAllocator(), {.max_tokens = 16});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  HostBatch b = testing::MakeBatch({9, 4}, cfg.vocab_size, 5);
  std::vector<float> la, lf;
  const auto ha = RunAll(**a, b, &la);
  const auto hf = RunAll(**f, b, &lf);
  for (size_t l = 0; l < ha.size(); ++l)
    EXPECT_TRUE(kernels::testing::BitEqual(ha[l], hf[l])) << "layer " << l;
  EXPECT_EQ(la, lf);
}

// Loads `dir` and returns the error message (empty when it loaded).
std::string LoadError(const std::string& dir, TargetPrecision precision = TargetPrecision::kBf16) {
  auto t = Qwen3Target::Load(dir, kernels::HostAllocator(),
                             {.max_tokens = 8, .precision = precision});
  return t.ok() ? std::string() : t.status().ToString();
}

// The loader's errors for a missing expert tensor and expert counts that disagree.
void LoaderErrors(TargetPrecision precision) {
  const TransformerConfig cfg = testing::TinyMoeConfig();
  HostWeights w = testing::RandomHostWeights(cfg, 19);
  {  // a missing expert tensor
    ScratchDir dir;
    HostWeights missing = w;
    missing.erase("model.layers.2.mlp.experts.4.up_proj.weight");
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, missing).ok());
    const std::string err = LoadError(dir.path(), precision);
    EXPECT_NE(err.find("model.layers.2.mlp.experts.4.up_proj.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
  }
  {  // config.json names fewer experts than the per-expert checkpoint holds
    ScratchDir dir;
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
    TransformerConfig fewer = cfg;
    fewer.moe->num_experts = 4;
    std::ofstream(dir.path() + "/config.json") << TransformerConfigToJson(fewer).dump(2);
    const std::string err = LoadError(dir.path(), precision);
    EXPECT_NE(err.find("but config.json's num_experts is 4"), std::string::npos) << err;
    EXPECT_NE(err.find("model.layers.0.mlp.experts."), std::string::npos) << err;
  }
  {  // ... or more than it holds
    ScratchDir dir;
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
    TransformerConfig more = cfg;
    more.moe->num_experts = 8;
    std::ofstream(dir.path() + "/config.json") << TransformerConfigToJson(more).dump(2);
    const std::string err = LoadError(dir.path(), precision);
    EXPECT_NE(err.find("'model.layers.0.mlp.experts.6.gate_proj.weight'"), std::string::npos)
        << err;
    EXPECT_NE(err.find("holds 6 of the 8 experts"), std::string::npos) << err;
  }
  {  // a fused checkpoint with another expert count
    ScratchDir dir;
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w, ExpertLayout::kFused).ok());
    TransformerConfig more = cfg;
    more.moe->num_experts = 7;
    std::ofstream(dir.path() + "/config.json") << TransformerConfigToJson(more).dump(2);
    const std::string err = LoadError(dir.path(), precision);
    EXPECT_NE(err.find("model.layers.0.mlp.experts.gate_up_proj"), std::string::npos) << err;
    EXPECT_NE(err.find("holds 6 experts but config.json's num_experts is 7"), std::string::npos)
        << err;
  }
}

// In both precisions: the fp8 load stages the experts layer by layer, after the same checks.
TEST(Qwen3MoeTargetTest, LoaderErrorsNameTheTensorAndTheFile) {
  for (const TargetPrecision precision : {TargetPrecision::kBf16, TargetPrecision::kFp8}) {
    SCOPED_TRACE(TargetPrecisionName(precision));
    LoaderErrors(precision);
  }
}

// precision = "fp8": the attention projections, the dense layer's MLP and the routed experts
// in e4m3, quantized layer by layer as the model loads, so the target holds no bf16
// projections or experts while the routers stay.
TEST(Qwen3MoeTargetTest, Fp8ForwardTracksBf16) {
  const TransformerConfig cfg = testing::TinyMoeConfig();
  const HostWeights w = testing::RandomHostWeights(cfg, 23);
  ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  auto bf = Qwen3Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = 40});
  auto f8 = Qwen3Target::Load(dir.path(), kernels::HostAllocator(),
                              {.max_tokens = 40, .precision = TargetPrecision::kFp8});
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  ASSERT_TRUE(f8.ok()) << f8.status().ToString();
  EXPECT_LT((*f8)->weight_bytes(), (*bf)->weight_bytes());
  EXPECT_FALSE((*f8)->weights().has_projections());
  EXPECT_TRUE((*f8)->weights().layers()[0].moe.experts.gate_up.empty());
  EXPECT_FALSE((*f8)->weights().layers()[0].moe.router.empty());
  EXPECT_FALSE((*f8)->fp8_projections().layers()[0].experts.empty());
  EXPECT_TRUE((*f8)->fp8_projections().layers()[1].experts.empty());  // the dense layer
  EXPECT_EQ((*f8)->workspace_bytes(), Qwen3Target::WorkspaceBytes(cfg, 40, TargetPrecision::kFp8));

  HostBatch b = testing::MakeBatch({5, 11, 1, 6}, cfg.vocab_size, 3);  // 23 tokens
  std::vector<float> want_logits, got_logits;
  const auto want = RunAll(**bf, b, &want_logits);
  const auto got = RunAll(**f8, b, &got_logits);
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    double rel = 0, min_cos = 0;
    testing::RelL2AndMinCos(got[l], want[l], cfg.hidden_size, &rel, &min_cos);
    // e4m3 keeps 3 mantissa bits; over three layers the captures stay within a few percent
    // of bf16 (as for the dense target). A forward that skipped the fp8 path gives rel == 0.
    EXPECT_GT(rel, 1e-4) << "layer " << l;
    EXPECT_LT(rel, 0.08) << "layer " << l;
    EXPECT_GT(min_cos, 0.99) << "layer " << l;
  }
}

TEST(Qwen3MoeTargetTest, RandomWeightsRunAndRouteEveryToken) {
  TransformerConfig cfg = testing::TinyMoeConfig();
  cfg.moe->mlp_only_layers.clear();
  cfg.moe->decoder_sparse_step = 1;
  auto target = Qwen3Target::Random(cfg, kernels::HostAllocator(), 3, {.max_tokens = 32});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_LT(Qwen3Target::WorkspaceBytes(cfg, 32),
            Qwen3Target::WorkspaceBytes(testing::TinyMoeConfig(), 32))
      << "a model without dense layers allocates no dense MLP activations";
  HostBatch b = testing::MakeBatch({20}, cfg.vocab_size, 9);
  std::vector<float> logits;
  RunAll(**target, b, &logits);
  ASSERT_NE((*target)->moe(), nullptr);
  const std::vector<int32_t> ids =
      kernels::testing::ToHost<int32_t>((*target)->moe()->topk_ids(20));
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_GE(ids[i], 0);
    EXPECT_LT(ids[i], cfg.moe->num_experts);
  }
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace tandem::models
