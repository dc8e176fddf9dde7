// CPU tests of the Qwen3 target: the bf16 forward against an independent float64
// reimplementation on tiny random checkpoints (Qwen3, tied embeddings, Llama), loader
// errors, argument checks, and (when generated) the HF transformers goldens.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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

using testing::HostPacked;
using testing::RelL2;
using testing::ToDouble;

struct Variant {
  const char* name;
  bool llama, tied;
};

class Qwen3TargetReferenceTest : public ::testing::TestWithParam<Variant> {};

using testing::kAtol;
using testing::kRelL2;
using testing::kRtol;
using testing::Rms;

TEST_P(Qwen3TargetReferenceTest, MatchesFloat64Reference) {
  const Variant var = GetParam();
  const TransformerConfig cfg = testing::TinyConfig(var.llama, var.tied);
  const HostWeights w = testing::RandomHostWeights(cfg, 7);
  ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  auto target = Qwen3Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = 40});
  ASSERT_TRUE(target.ok()) << target.status().ToString();

  HostBatch b = testing::MakeBatch({5, 11, 1, 7}, cfg.vocab_size, 3);
  const int64_t t = static_cast<int64_t>(b.ids.size()), h = cfg.hidden_size;
  std::vector<std::vector<bf16>> hidden(3, std::vector<bf16>(t * h));
  std::vector<LayerCapture> caps;
  for (int l = 0; l < 3; ++l) caps.push_back({l, TensorView(hidden[l].data(), DType::kBF16, {t, h})});
  std::vector<float> logits(t * cfg.vocab_size);
  ASSERT_TRUE((*target)
                  ->Forward(HostPacked(b), caps,
                            TensorView(logits.data(), DType::kF32, {t, cfg.vocab_size}))
                  .ok());

  const testing::RefOutputs ref = testing::ReferenceForward(cfg, w, b);
  for (int l = 0; l < 3; ++l) {
    const std::vector<double> got = ToDouble(hidden[l]);
    EXPECT_TRUE(AllClose(got, ref.hidden[l], kAtol * Rms(ref.hidden[l]), kRtol,
                         "hidden." + std::to_string(l)));
    EXPECT_LT(RelL2(got, ref.hidden[l]), kRelL2) << "layer " << l;
  }
  const std::vector<double> got_logits(logits.begin(), logits.end());
  EXPECT_TRUE(AllClose(got_logits, ref.logits, kAtol * Rms(ref.logits), kRtol, "logits"));
  EXPECT_LT(RelL2(got_logits, ref.logits), kRelL2);

  // Sensitivity: the same tokens as one document differ far beyond the tolerance, so the
  // check above would catch attention leaking across document boundaries.
  HostBatch merged = b;
  merged.cu = {0, static_cast<int32_t>(t)};
  const testing::RefOutputs leak = testing::ReferenceForward(cfg, w, merged);
  EXPECT_GT(RelL2(leak.hidden[2], ref.hidden[2]), 10 * kRelL2);
}

INSTANTIATE_TEST_SUITE_P(Variants, Qwen3TargetReferenceTest,
                         ::testing::Values(Variant{"qwen3", false, false},
                                           Variant{"qwen3_tied", false, true},
                                           Variant{"llama", true, false}),
                         [](const auto& info) { return std::string(info.param.name); });

class Qwen3TargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_ = testing::TinyConfig(false, false);
    w_ = testing::RandomHostWeights(cfg_, 11);
    ASSERT_TRUE(testing::WriteCheckpoint(dir_.path(), cfg_, w_).ok());
  }
  TransformerConfig cfg_;
  HostWeights w_;
  ScratchDir dir_;
};

TEST_F(Qwen3TargetTest, StopsAfterLastCaptureWithTheSameResult) {
  auto target = Qwen3Target::Load(dir_.path(), kernels::HostAllocator(), {.max_tokens = 16});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  HostBatch b = testing::MakeBatch({6, 9}, cfg_.vocab_size, 5);
  const int64_t t = 15, h = cfg_.hidden_size;
  std::vector<bf16> early(t * h), full(t * h), last(t * h);
  std::vector<float> logits(t * cfg_.vocab_size);
  const LayerCapture one[] = {{1, TensorView(early.data(), DType::kBF16, {t, h})}};
  ASSERT_TRUE((*target)->Forward(HostPacked(b), one).ok());
  const LayerCapture two[] = {{2, TensorView(last.data(), DType::kBF16, {t, h})},
                              {1, TensorView(full.data(), DType::kBF16, {t, h})}};
  ASSERT_TRUE((*target)
                  ->Forward(HostPacked(b), two,
                            TensorView(logits.data(), DType::kF32, {t, cfg_.vocab_size}))
                  .ok());
  EXPECT_TRUE(kernels::testing::BitEqual(early, full));
  EXPECT_FALSE(kernels::testing::BitEqual(early, last));  // layer 2 really is another layer
}

TEST_F(Qwen3TargetTest, RejectsBadForwardArguments) {
  auto target = Qwen3Target::Load(dir_.path(), kernels::HostAllocator(), {.max_tokens = 8});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  const int64_t h = cfg_.hidden_size;
  HostBatch b = testing::MakeBatch({3, 4}, cfg_.vocab_size, 5);
  std::vector<bf16> buf(7 * h), buf2(7 * h);
  const TensorView out(buf.data(), DType::kBF16, {7, h});
  const LayerCapture out_of_range[] = {{3, out}};
  EXPECT_NE((*target)->Forward(HostPacked(b), out_of_range).message().find("not in [0, 3)"),
            std::string::npos);
  const LayerCapture twice[] = {{1, out}, {1, TensorView(buf2.data(), DType::kBF16, {7, h})}};
  EXPECT_FALSE((*target)->Forward(HostPacked(b), twice).ok());
  const LayerCapture wrong_shape[] = {{1, TensorView(buf.data(), DType::kBF16, {6, h})}};
  EXPECT_FALSE((*target)->Forward(HostPacked(b), wrong_shape).ok());
  HostBatch big = testing::MakeBatch({9}, cfg_.vocab_size, 5);
  std::vector<bf16> buf9(9 * h);
  const LayerCapture nine[] = {{0, TensorView(buf9.data(), DType::kBF16, {9, h})}};
  EXPECT_NE((*target)->Forward(HostPacked(big), nine).message().find("1..8"), std::string::npos);
}

// Writes config.json + model.safetensors (all bf16) into `dir` without tensor `drop` and
// with tensor `transpose` stored with its two dims swapped.
void WriteAltered(const ScratchDir& dir, const TransformerConfig& cfg, const HostWeights& w,
                  const std::string& drop, const std::string& transpose) {
  std::ofstream(dir.File("config.json")) << TransformerConfigToJson(cfg).dump();
  std::vector<std::vector<bf16>> data;
  std::vector<TensorToWrite> tensors;
  for (const WeightSpec& s : CausalLmWeightSpecs(cfg)) {
    if (s.name == drop) continue;
    std::vector<int64_t> shape = s.shape;
    if (s.name == transpose) std::swap(shape[0], shape[1]);
    data.emplace_back();
    for (float x : w.at(s.name)) data.back().push_back(bf16(x));
    tensors.push_back({s.name, DType::kBF16, shape, {}});
  }
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = std::as_bytes(std::span(data[i]));
  ASSERT_TRUE(WriteSafetensors(dir.File("model.safetensors"), tensors).ok());
}

TEST_F(Qwen3TargetTest, LoadNamesMissingAndMisshapenTensors) {
  ScratchDir missing;
  WriteAltered(missing, cfg_, w_, "model.layers.1.mlp.up_proj.weight", "");
  auto r = Qwen3Target::Load(missing.path(), kernels::HostAllocator(), {.max_tokens = 8});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.layers.1.mlp.up_proj.weight"), std::string::npos)
      << r.status().ToString();

  ScratchDir misshapen;
  WriteAltered(misshapen, cfg_, w_, "", "model.layers.2.self_attn.k_proj.weight");
  r = Qwen3Target::Load(misshapen.path(), kernels::HostAllocator(), {.max_tokens = 8});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.layers.2.self_attn.k_proj.weight"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find(misshapen.File("model.safetensors")), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace tandem::models
