// The hybrid target's CPU forward on the transformers goldens of
// tests/golden/make_qwen3_5_golden.py (a tiny random Qwen3.5 in the wrapper layout, its fp32
// reference and HF bf16 hidden states, each document run alone), plus the capture contract,
// the text-only layout and the loader's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/testing/testing.h"
#include "models/io/file_util.h"
#include "models/io/model_test_util.h"
#include "models/io/safetensors_writer.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::TensorView;
using testing::AsAccurateAsHf;
using testing::kDir;
using testing::kGolden;
using testing::Read;

using testing::GoldenRun;

GoldenRun Forward(Qwen35Target& target, const SafetensorsReader& golden, std::vector<int> layers) {
  return testing::GoldenForward(target, golden, layers);
}

std::unique_ptr<Qwen35Target> LoadTarget(const std::string& dir) {
  return testing::LoadHostTarget(dir);
}

TEST(Qwen35GoldenTest, EveryLayerAsAccurateAsTransformersBf16) {
  testing::CheckEveryLayer(kDir, kGolden);
}

TEST(Qwen35GoldenTest, NoLayerRunsAfterTheLastCapture) {
  auto golden = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(golden.ok());
  auto target = LoadTarget(kDir);
  // Poison layer 4's MLP: captures up to layer 3 must not see it, layer 4 must.
  const TensorView gate_up = target->weights().layers()[4].gate_up;
  std::fill_n(gate_up.data_as<bf16>(), gate_up.numel(), bf16(NAN));
  GoldenRun r = Forward(*target, *golden, {3, 1});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(AsAccurateAsHf(r.out[0], Read<float>(*golden, "hidden.3", DType::kF32),
                             Read<float>(*golden, "bf16_hf.hidden.3", DType::kF32), "hidden.3"));
  GoldenRun poisoned = Forward(*target, *golden, {4});
  ASSERT_TRUE(poisoned.status.ok());
  EXPECT_TRUE(std::isnan(poisoned.out[0][0].f()));
}

// Rewrites the golden checkpoint into `dir` (testing::RewriteCheckpoint).
void Rewrite(const std::string& dir, const nlohmann::json& config,
             const std::function<std::string(const std::string&)>& edit,
             const std::string& reshape = "") {
  testing::RewriteCheckpoint(kDir, dir, config, edit, reshape);
}

nlohmann::json GoldenConfig() { return testing::ReadConfigJson(kDir); }

TEST(Qwen35GoldenTest, TextOnlyLayoutGivesTheSameOutputs) {
  testing::ScratchDir dir;
  testing::WriteTextOnly(kDir, dir.path(), "Qwen3_5ForCausalLM");
  auto golden = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(golden.ok());
  auto wrapper = LoadTarget(kDir), text_only = LoadTarget(dir.path());
  EXPECT_EQ(text_only->config().weight_prefix, "model.");
  GoldenRun a = Forward(*wrapper, *golden, {2, 7}), b = Forward(*text_only, *golden, {2, 7});
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(kernels::testing::BitEqual(a.out[i], b.out[i]));
}

// Each layer alone on the reference's input (testing::CheckEachLayerAlone).
TEST(Qwen35GoldenTest, EachLayerAloneOnTheReferenceInput) {
  testing::CheckEachLayerAlone(kDir, kGolden);
}

TEST(Qwen35GoldenTest, MissingOrMisShapedTensorsAreNamed) {
  const std::string victim = "model.language_model.layers.3.self_attn.q_proj.weight";
  {
    testing::ScratchDir dir;
    Rewrite(dir.path(), GoldenConfig(),
            [&](const std::string& n) { return n == victim ? std::string() : n; });
    auto t = Qwen35Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = 16});
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(victim), std::string::npos) << t.status().ToString();
    EXPECT_NE(t.status().message().find("model.safetensors"), std::string::npos);
  }
  {
    testing::ScratchDir dir;
    Rewrite(
        dir.path(), GoldenConfig(), [](const std::string& n) { return n; }, victim);
    auto t = Qwen35Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = 16});
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(victim), std::string::npos) << t.status().ToString();
    EXPECT_NE(t.status().message().find("[128, 128]"), std::string::npos) << t.status().ToString();
  }
}

TEST(Qwen35GoldenTest, RejectsBadForwardArguments) {
  auto golden = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(golden.ok());
  auto target = LoadTarget(kDir);
  GoldenRun r = Forward(*target, *golden, {8});
  EXPECT_NE(r.status.message().find("capture layer 8 not in [0, 8)"), std::string::npos)
      << r.status.ToString();
  r = Forward(*target, *golden, {2, 2});
  EXPECT_NE(r.status.message().find("captured twice"), std::string::npos) << r.status.ToString();
  std::vector<int32_t> ids = {1, 2, 3}, pos = {0, 1, 0}, cu = {0, 2, 4};
  std::vector<bf16> out(3 * 64);
  const HybridCapture cap{0, TensorView(out.data(), DType::kBF16, {3, 64})};
  Status st = target->Forward(
      {TensorView(ids.data(), DType::kI32, {3}), TensorView(pos.data(), DType::kI32, {3}),
       TensorView(cu.data(), DType::kI32, {3})},
      {&cap, 1});
  EXPECT_NE(st.message().find("cu_seqlens"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::models
