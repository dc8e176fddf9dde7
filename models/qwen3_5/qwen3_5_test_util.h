// Test utilities for the Qwen3.5 target tests: the committed goldens of
// tests/golden/make_qwen3_5_golden.py (and make_qwen3_5_moe_golden.py), tensor reads, the "as
// accurate as transformers' bf16" criterion, and the golden checks both families run (every
// layer, each layer alone, checkpoint rewrites). Test-only; expects TANDEM_SOURCE_DIR to be
// defined.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/testing/testing.h"
#include "models/io/file_util.h"
#include "models/io/model_test_util.h"
#include "models/io/safetensors.h"
#include "models/io/safetensors_writer.h"
#include "models/qwen3_5/qwen3_5_target.h"

namespace tandem::models::testing {

using kernels::bf16;
using kernels::DType;

inline const std::string kDir = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_5_tiny";
inline const std::string kGolden =
    std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_5_tiny_golden.safetensors";

template <typename T>
inline std::vector<T> Read(const SafetensorsReader& r, const std::string& name, DType as) {
  auto t = r.Get(name);
  TANDEM_CHECK_OK(t.status());
  std::vector<T> v(static_cast<size_t>((*t)->numel()));
  TANDEM_CHECK_OK(r.Read(**t, as, v.data(), (*t)->numel() * static_cast<int64_t>(sizeof(T))));
  return v;
}

// As accurate as transformers' own bf16 forward (the criterion of the Qwen3 goldens): max
// |err| against the fp32 reference at most twice HF's + 1e-3, relative L2 at most
// max(1e-2, 1.5x HF's).
inline ::testing::AssertionResult AsAccurateAsHf(const std::vector<bf16>& got,
                                                 const std::vector<float>& ref,
                                                 const std::vector<float>& hf,
                                                 const std::string& what) {
  double ours = 0, theirs = 0, num = 0, num_hf = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = static_cast<double>(got[i].f()) - ref[i];
    const double e_hf = static_cast<double>(hf[i]) - ref[i];
    ours = std::max(ours, std::abs(e));
    theirs = std::max(theirs, std::abs(e_hf));
    num += e * e;
    num_hf += e_hf * e_hf;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  const double rel = std::sqrt(num / den), rel_hf = std::sqrt(num_hf / den);
  ::testing::AssertionResult r = (ours <= 2 * theirs + 1e-3 && rel <= std::max(1e-2, 1.5 * rel_hf))
                                     ? ::testing::AssertionSuccess()
                                     : ::testing::AssertionFailure();
  return r << what << ": max |err| " << ours << " (HF bf16 " << theirs << "), relative L2 " << rel
           << " (HF bf16 " << rel_hf << ")";
}

inline std::unique_ptr<Qwen35Target> LoadHostTarget(const std::string& dir) {
  auto t = Qwen35Target::Load(dir, kernels::HostAllocator(), {.max_tokens = 256});
  TANDEM_CHECK_OK(t.status());
  return std::move(t).value();
}

inline nlohmann::json ReadConfigJson(const std::string& dir) {
  auto text = ReadTextFile(dir + "/config.json");
  TANDEM_CHECK_OK(text.status());
  return nlohmann::json::parse(*text);
}

// The golden batch and one bf16 [T, H] buffer per captured layer.
struct GoldenRun {
  std::vector<int32_t> ids, pos, cu;
  std::vector<std::vector<bf16>> out;
  std::vector<HybridCapture> caps;
  Status status;
};

inline GoldenRun GoldenForward(Qwen35Target& target, const SafetensorsReader& golden,
                               const std::vector<int>& layers) {
  GoldenRun r;
  r.ids = Read<int32_t>(golden, "input_ids", DType::kI32);
  r.pos = Read<int32_t>(golden, "position_ids", DType::kI32);
  r.cu = Read<int32_t>(golden, "cu_seqlens", DType::kI32);
  const int64_t t = static_cast<int64_t>(r.ids.size()), h = target.config().hidden_size;
  r.out.resize(layers.size(), std::vector<bf16>(t * h));
  for (size_t i = 0; i < layers.size(); ++i)
    r.caps.push_back({layers[i], kernels::TensorView(r.out[i].data(), DType::kBF16, {t, h})});
  const HybridBatch batch{
      kernels::TensorView(r.ids.data(), DType::kI32, {t}),
      kernels::TensorView(r.pos.data(), DType::kI32, {t}),
      kernels::TensorView(r.cu.data(), DType::kI32, {static_cast<int64_t>(r.cu.size())})};
  r.status = target.Forward(batch, r.caps);
  return r;
}

// Every layer of the golden model in `model_dir` as accurate as HF's bf16 (`hidden.{i}`).
inline void CheckEveryLayer(const std::string& model_dir, const std::string& golden_file) {
  auto golden = SafetensorsReader::Open(golden_file);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  auto target = LoadHostTarget(model_dir);
  std::vector<int> layers;
  for (int l = 0; l < target->config().num_hidden_layers; ++l) layers.push_back(l);
  GoldenRun r = GoldenForward(*target, *golden, layers);
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

// Rewrites the checkpoint of `model_dir` into `dir` through `edit(name) -> new name ("" drops
// it)`, with config.json from `config`; the tensor named `reshape` (after the edit) gets
// [rows / 2, 2 * cols].
inline void RewriteCheckpoint(const std::string& model_dir, const std::string& dir,
                              const nlohmann::json& config,
                              const std::function<std::string(const std::string&)>& edit,
                              const std::string& reshape = "") {
  auto reader = SafetensorsReader::Open(model_dir);
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
  WriteRaw(dir + "/config.json", config.dump());
}

// The wrapper checkpoint of `model_dir` as a text-only model in `dir` (architecture `arch`):
// text weights under `model.`, the vision tower and the MTP head dropped.
inline void WriteTextOnly(const std::string& model_dir, const std::string& dir,
                          const std::string& arch) {
  nlohmann::json text = ReadConfigJson(model_dir)["text_config"];
  text["architectures"] = {arch};
  RewriteCheckpoint(model_dir, dir, text, [](const std::string& n) -> std::string {
    const std::string p = "model.language_model.";
    if (n.starts_with(p)) return "model." + n.substr(p.size());
    return n.starts_with("lm_head.") ? n : "";
  });
}

// Layer i alone, fed the reference's layer i-1 output (rounded to bf16) through a one-layer
// checkpoint whose embedding rows are those hidden states, against the same layer alone in
// fp32 and in HF bf16 on the same input (`alone.hidden.{i}`; the generators build that
// one-layer model the same way): one layer's rounding, without the amplification of
// earlier layers' errors.
inline void CheckEachLayerAlone(const std::string& model_dir, const std::string& golden_file) {
  auto golden = SafetensorsReader::Open(golden_file);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  const std::vector<int32_t> cu = Read<int32_t>(*golden, "cu_seqlens", DType::kI32);
  const nlohmann::json base = ReadConfigJson(model_dir);
  const int64_t t = cu.back(), h = base["text_config"]["hidden_size"].get<int64_t>();
  const int layers = base["text_config"]["num_hidden_layers"].get<int>();
  for (int layer = 1; layer < layers; ++layer) {
    ScratchDir dir;
    nlohmann::json config = base;
    nlohmann::json& text = config["text_config"];
    text["num_hidden_layers"] = 1;
    text["layer_types"] = {text["layer_types"][layer]};
    text["vocab_size"] = t;
    const std::vector<float> in =
        Read<float>(*golden, "hidden." + std::to_string(layer - 1), DType::kF32);
    std::vector<bf16> embed, head(t * h, bf16(0.f));
    for (float x : in) embed.push_back(bf16(x));
    const std::string from = fmt::format("model.language_model.layers.{}.", layer);
    auto reader = SafetensorsReader::Open(model_dir);
    ASSERT_TRUE(reader.ok());
    std::vector<TensorToWrite> out;
    out.push_back({"model.language_model.embed_tokens.weight", DType::kBF16, {t, h},
                   std::as_bytes(std::span<const bf16>(embed))});
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
    WriteRaw(dir.path() + "/config.json", config.dump());
    auto target = LoadHostTarget(dir.path());
    std::vector<int32_t> ids(t), pos = Read<int32_t>(*golden, "position_ids", DType::kI32);
    for (int64_t i = 0; i < t; ++i) ids[i] = static_cast<int32_t>(i);
    std::vector<int32_t> cu_copy = cu;
    std::vector<bf16> got(t * h);
    const HybridCapture cap{0, kernels::TensorView(got.data(), DType::kBF16, {t, h})};
    const HybridBatch batch{
        kernels::TensorView(ids.data(), DType::kI32, {t}),
        kernels::TensorView(pos.data(), DType::kI32, {t}),
        kernels::TensorView(cu_copy.data(), DType::kI32, {static_cast<int64_t>(cu.size())})};
    ASSERT_TRUE(target->Forward(batch, {&cap, 1}).ok());
    const std::string name = "alone.hidden." + std::to_string(layer);
    ::testing::AssertionResult ok =
        AsAccurateAsHf(got, Read<float>(*golden, name, DType::kF32),
                       Read<float>(*golden, "bf16_hf." + name, DType::kF32), name);
    EXPECT_TRUE(ok);
    std::printf("%s\n", ok.message());
  }
}

}  // namespace tandem::models::testing
