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

// The golden batch and one bf16 [T, H] buffer per captured layer.
struct GoldenRun {
  std::vector<int32_t> ids, pos, cu;
  std::vector<std::vector<bf16>> out;
  std::vector<HybridCapture> caps;
  Status status;
};

GoldenRun Forward(Qwen35Target& target, const SafetensorsReader& golden, std::vector<int> layers) {
  GoldenRun r;
  r.ids = Read<int32_t>(golden, "input_ids", DType::kI32);
  r.pos = Read<int32_t>(golden, "position_ids", DType::kI32);
  r.cu = Read<int32_t>(golden, "cu_seqlens", DType::kI32);
  const int64_t t = static_cast<int64_t>(r.ids.size()), h = target.config().hidden_size;
  r.out.resize(layers.size(), std::vector<bf16>(t * h));
  for (size_t i = 0; i < layers.size(); ++i)
    r.caps.push_back({layers[i], TensorView(r.out[i].data(), DType::kBF16, {t, h})});
  HybridBatch batch{TensorView(r.ids.data(), DType::kI32, {t}),
                    TensorView(r.pos.data(), DType::kI32, {t}),
                    TensorView(r.cu.data(), DType::kI32, {static_cast<int64_t>(r.cu.size())})};
  r.status = target.Forward(batch, r.caps);
  return r;
}

std::unique_ptr<Qwen35Target> LoadTarget(const std::string& dir) {
  auto t = Qwen35Target::Load(dir, kernels::HostAllocator(), {.max_tokens = 256});
  TANDEM_CHECK_OK(t.status());
  return std::move(t).value();
}

TEST(Qwen35GoldenTest, EveryLayerAsAccurateAsTransformersBf16) {
  auto golden = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  auto target = LoadTarget(kDir);
  const std::vector<int> layers = {0, 1, 2, 3, 4, 5, 6, 7};
  GoldenRun r = Forward(*target, *golden, layers);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string name = "hidden." + std::to_string(layers[i]);
    ::testing::AssertionResult ok =
        AsAccurateAsHf(r.out[i], Read<float>(*golden, name, DType::kF32),
                       Read<float>(*golden, "bf16_hf." + name, DType::kF32), name);
    EXPECT_TRUE(ok);
    std::printf("%s\n", ok.message());
  }
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

// Rewrites the golden checkpoint into `dir` through `edit(name) -> new name ("" drops it)`,
// with config.json from `config`.
void Rewrite(const std::string& dir, const nlohmann::json& config,
             const std::function<std::string(const std::string&)>& edit,
             const std::string& reshape = "") {
  auto reader = SafetensorsReader::Open(kDir);
  TANDEM_CHECK_OK(reader.status());
  std::vector<TensorToWrite> out;
  for (const TensorInfo& t : reader->tensors()) {
    const std::string name = edit(t.name);
    if (name.empty()) continue;
    std::vector<int64_t> shape = t.shape;
    if (name == reshape) shape = {shape[0] / 2, 2 * shape[1]};
    out.push_back({name, t.dtype, shape, reader->Bytes(t)});
  }
  TANDEM_CHECK_OK(WriteSafetensors(dir + "/model.safetensors", out));
  testing::WriteRaw(dir + "/config.json", config.dump());
}

nlohmann::json GoldenConfig() {
  auto text = ReadTextFile(kDir + "/config.json");
  TANDEM_CHECK_OK(text.status());
  return nlohmann::json::parse(*text);
}

TEST(Qwen35GoldenTest, TextOnlyLayoutGivesTheSameOutputs) {
  testing::ScratchDir dir;
  nlohmann::json text = GoldenConfig()["text_config"];
  text["architectures"] = {"Qwen3_5ForCausalLM"};
  Rewrite(dir.path(), text, [](const std::string& n) -> std::string {
    const std::string p = "model.language_model.";
    if (n.starts_with(p)) return "model." + n.substr(p.size());
    return n.starts_with("lm_head.") ? n : "";  // drop the vision tower and the MTP head
  });
  auto golden = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(golden.ok());
  auto wrapper = LoadTarget(kDir), text_only = LoadTarget(dir.path());
  EXPECT_EQ(text_only->config().weight_prefix, "model.");
  GoldenRun a = Forward(*wrapper, *golden, {2, 7}), b = Forward(*text_only, *golden, {2, 7});
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(kernels::testing::BitEqual(a.out[i], b.out[i]));
}

// Layer i alone, fed the reference's layer i-1 output (rounded to bf16) through a one-layer
// checkpoint whose embedding rows are those hidden states, against the same layer alone in
// fp32 and in HF bf16 on the same input (the generator builds that one-layer model the same
// way): one layer's rounding, without the amplification of earlier layers' errors.
TEST(Qwen35GoldenTest, EachLayerAloneOnTheReferenceInput) {
  auto golden = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(golden.ok());
  const std::vector<int32_t> cu = Read<int32_t>(*golden, "cu_seqlens", DType::kI32);
  const int64_t t = cu.back(), h = 64;
  for (int layer = 1; layer < 8; ++layer) {
    testing::ScratchDir dir;
    nlohmann::json config = GoldenConfig();
    nlohmann::json& text = config["text_config"];
    text["num_hidden_layers"] = 1;
    text["layer_types"] = {text["layer_types"][layer]};
    text["vocab_size"] = t;
    const std::vector<float> in =
        Read<float>(*golden, "hidden." + std::to_string(layer - 1), DType::kF32);
    std::vector<bf16> embed;
    for (float x : in) embed.push_back(bf16(x));
    const std::string from = fmt::format("model.language_model.layers.{}.", layer);
    auto reader = SafetensorsReader::Open(kDir);
    ASSERT_TRUE(reader.ok());
    std::vector<TensorToWrite> out;
    out.push_back({"model.language_model.embed_tokens.weight",
                   DType::kBF16,
                   {t, h},
                   std::as_bytes(std::span<const bf16>(embed))});
    std::vector<bf16> head(t * h, bf16(0.f));
    out.push_back(
        {"lm_head.weight", DType::kBF16, {t, h}, std::as_bytes(std::span<const bf16>(head))});
    for (const TensorInfo& ti : reader->tensors()) {
      if (ti.name.starts_with(from))
        out.push_back({"model.language_model.layers.0." + ti.name.substr(from.size()), ti.dtype,
                       ti.shape, reader->Bytes(ti)});
      else if (ti.name == "model.language_model.norm.weight")
        out.push_back({ti.name, ti.dtype, ti.shape, reader->Bytes(ti)});
    }
    ASSERT_TRUE(WriteSafetensors(dir.path() + "/model.safetensors", out).ok());
    testing::WriteRaw(dir.path() + "/config.json", config.dump());
    auto target = LoadTarget(dir.path());
    std::vector<int32_t> ids(t), pos = Read<int32_t>(*golden, "position_ids", DType::kI32);
    for (int64_t i = 0; i < t; ++i) ids[i] = static_cast<int32_t>(i);
    std::vector<int32_t> cu_copy = cu;
    std::vector<bf16> got(t * h);
    const HybridCapture cap{0, TensorView(got.data(), DType::kBF16, {t, h})};
    ASSERT_TRUE(
        target
            ->Forward(
                {TensorView(ids.data(), DType::kI32, {t}), TensorView(pos.data(), DType::kI32, {t}),
                 TensorView(cu_copy.data(), DType::kI32, {static_cast<int64_t>(cu.size())})},
                {&cap, 1})
            .ok());
    const std::string name = "alone.hidden." + std::to_string(layer);
    ::testing::AssertionResult ok =
        AsAccurateAsHf(got, Read<float>(*golden, name, DType::kF32),
                       Read<float>(*golden, "bf16_hf." + name, DType::kF32), name);
    EXPECT_TRUE(ok);
    std::printf("%s\n", ok.message());
  }
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
