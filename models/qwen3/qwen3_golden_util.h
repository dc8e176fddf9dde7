// Test utility: runs the Qwen3 target on the HF transformers goldens made by
// tests/golden/make_qwen3_golden.py and make_qwen3_moe_golden.py (tiny random Qwen3 and
// Qwen3-MoE saved with save_pretrained, and the float64 reference + bf16 transformers
// outputs of a packed batch) and compares, on the CPU or a CUDA device; for MoE goldens also
// the router's choices (RouterAgreement). Test-only; expects TANDEM_SOURCE_DIR to be defined.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/device_pools.h"
#include "kernels/moe/moe_testing.h"
#include "kernels/testing/testing.h"
#include "models/qwen3/qwen3_target.h"
#include "models/io/safetensors.h"

namespace tandem::models::testing {

// A golden model directory and its golden file under tests/golden/.
struct GoldenSet {
  std::string model_dir, file;
  const char* missing;  // the skip message while they are not generated
};
inline GoldenSet Qwen3Golden() {
  const std::string g = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/";
  return {g + "qwen3_tiny", g + "qwen3_tiny_golden.safetensors",
          "tests/golden/qwen3_tiny{,_golden.safetensors} not generated yet: run "
          "`python3 tests/golden/make_qwen3_golden.py` where torch + transformers are installed"};
}
inline GoldenSet Qwen3MoeGolden() {
  const std::string g = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/";
  return {g + "qwen3_moe_tiny", g + "qwen3_moe_tiny_golden.safetensors",
          "tests/golden/qwen3_moe_tiny{,_golden.safetensors} not generated yet: run "
          "`python3 tests/golden/make_qwen3_moe_golden.py` where torch + transformers are "
          "installed"};
}
inline bool HaveGolden(const GoldenSet& g) {
  return std::filesystem::exists(g.model_dir + "/config.json") &&
         std::filesystem::exists(g.file);
}
inline bool HaveQwen3Golden() { return HaveGolden(Qwen3Golden()); }
inline constexpr char kNoGoldenMessage[] =
    "tests/golden/qwen3_tiny{,_golden.safetensors} not generated yet: run "
    "`python3 tests/golden/make_qwen3_golden.py` where torch + transformers are installed";

inline std::vector<float> ReadF32(const SafetensorsReader& r, const std::string& name) {
  auto t = r.Get(name);
  TANDEM_CHECK_OK(t.status());
  std::vector<float> v(static_cast<size_t>((*t)->numel()));
  TANDEM_CHECK_OK(r.Read(**t, kernels::DType::kF32, v.data(), (*t)->numel() * 4));
  return v;
}
inline std::vector<int32_t> ReadI32(const SafetensorsReader& r, const std::string& name) {
  auto t = r.Get(name);
  TANDEM_CHECK_OK(t.status());
  std::vector<int32_t> v(static_cast<size_t>((*t)->numel()));
  TANDEM_CHECK_OK(r.Read(**t, kernels::DType::kI32, v.data(), (*t)->numel() * 4));
  return v;
}

// An uninitialised tensor (aborts on failure: tests only).
inline kernels::Tensor EmptyTensor(kernels::Allocator& alloc, kernels::DType dtype,
                                   kernels::Shape shape) {
  Result<kernels::Tensor> t = kernels::Tensor::Empty(alloc, dtype, shape);
  TANDEM_CHECK_OK(t.status());
  return std::move(t).value();
}

// Passes when our error against the float64 reference is no worse than that of the bf16
// transformers forward of the same inputs: max |err| at most twice HF's (+1e-3, a floor for
// tensors HF happens to get almost exact) and relative L2 at most max(1e-2, 1.5x HF's). Both
// are bf16 forwards of the same math that round at slightly different points (tandem fuses
// the residual adds, so it rounds less often); a real bug (wrong layer, a skipped norm weight,
// a RoPE mistake) gives errors of the size of the values themselves. The relative-L2 bound
// follows HF's because bf16 error grows with depth: on the Qwen3-8B-shaped random model
// (36 layers, H200 run) ours was 1.2e-2 at layer 1 and 5.0e-2 at layer 33, with max errors
// 0.22..3.8 against HF's 0.33..5.5, so a fixed 1e-2 would reject a forward more accurate
// than transformers'.
inline ::testing::AssertionResult AsAccurateAsTransformers(const std::vector<float>& got,
                                                           const std::vector<float>& ref,
                                                           const std::vector<float>& hf,
                                                           const std::string& what) {
  double ours = 0, theirs = 0, num = 0, num_hf = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = static_cast<double>(got[i]) - ref[i];
    const double e_hf = static_cast<double>(hf[i]) - ref[i];
    ours = std::max(ours, std::abs(e));
    theirs = std::max(theirs, std::abs(e_hf));
    num += e * e;
    num_hf += e_hf * e_hf;
    den += ref[i] * static_cast<double>(ref[i]);
  }
  const double rel = std::sqrt(num / den), rel_hf = std::sqrt(num_hf / den);
  if (!(ours <= 2 * theirs + 1e-3) || !(rel <= std::max(1e-2, 1.5 * rel_hf))) {
    return ::testing::AssertionFailure()
           << what << ": max |err| " << ours << " vs transformers bf16 " << theirs
           << ", relative L2 " << rel << " vs transformers bf16 " << rel_hf;
  }
  return ::testing::AssertionSuccess();
}

// Router agreement on a MoE golden: for every MoE layer l with `router.{l}.topk` (the float64
// reference's choices), runs the forward up to l and compares the target's top-k sets with
// the reference's. Passes when the share of tokens whose set differs is at most
// max(5%, 2x that of transformers' bf16 model, `bf16_hf.router.{l}.topk`): the routers see
// bf16 inputs whose rounding flips near-ties; a wrong router (no softmax order, wrong top-k,
// wrong weight rows) differs on most tokens.
inline void CheckRouterAgreement(Qwen3Target& target, const SafetensorsReader& reader,
                                 const PackedBatch& batch, kernels::Allocator& alloc,
                                 kernels::Device device, kernels::Stream stream) {
  const TransformerConfig& c = target.config();
  const int64_t t = batch.input_ids.dim(0), k = c.moe->num_experts_per_tok;
  kernels::Tensor out = EmptyTensor(alloc, kernels::DType::kBF16, {t, c.hidden_size});
  int checked = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string name = "router." + std::to_string(l) + ".topk";
    if (!c.IsMoeLayer(l) || reader.Find(name) == nullptr) continue;
    const LayerCapture cap{l, out.view()};
    ASSERT_TRUE(target.Forward(batch, {&cap, 1}).ok());
    ASSERT_TRUE(kernels::SynchronizeStream(device, stream).ok());
    const std::vector<int32_t> ours = kernels::testing::ToHost<int32_t>(target.moe()->topk_ids(t));
    const double differ = kernels::testing::RouterSetsDiffer(ours, ReadI32(reader, name), k);
    const double hf = kernels::testing::RouterSetsDiffer(ReadI32(reader, "bf16_hf." + name),
                                                         ReadI32(reader, name), k);
    EXPECT_LE(differ, std::max(0.05, 2 * hf))
        << "layer " << l << ": " << differ << " of the tokens pick another expert set than the "
        << "float64 reference (transformers bf16: " << hf << ")";
    std::printf("router layer %d: expert sets differing from the float64 reference: tandem "
                "%.4f, transformers bf16 %.4f\n", l, differ, hf);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no router.{l}.topk in the golden";
}

// Loads the golden model of `g` (default tests/golden/qwen3_tiny) onto `device`, runs the
// golden batch capturing every layer with logits, and compares with the goldens; for a MoE
// model also the router's choices (CheckRouterAgreement).
inline void CheckQwen3Golden(kernels::Device device, kernels::Stream stream,
                             const GoldenSet& g = Qwen3Golden()) {
  using kernels::DType;
  auto reader = SafetensorsReader::Open(g.file);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const std::vector<int32_t> ids = ReadI32(*reader, "input_ids"),
                             pos = ReadI32(*reader, "position_ids"),
                             cu = ReadI32(*reader, "cu_seqlens");
  const int64_t t = static_cast<int64_t>(ids.size());
  kernels::DevicePools pools;  // outlives everything below
  kernels::Allocator* alloc = pools.For(device).value();
  auto target = Qwen3Target::Load(g.model_dir, *alloc, {.max_tokens = t, .stream = stream});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  const TransformerConfig& c = (*target)->config();
  using kernels::testing::MakeTensor;
  kernels::Tensor ids_t = MakeTensor<int32_t>(*alloc, DType::kI32, {t}, ids);
  kernels::Tensor pos_t = MakeTensor<int32_t>(*alloc, DType::kI32, {t}, pos);
  kernels::Tensor cu_t =
      MakeTensor<int32_t>(*alloc, DType::kI32, {static_cast<int64_t>(cu.size())}, cu);
  int max_seqlen = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) max_seqlen = std::max(max_seqlen, cu[i + 1] - cu[i]);

  std::vector<kernels::Tensor> hidden;
  std::vector<LayerCapture> caps;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (reader->Find("hidden." + std::to_string(l)) == nullptr) continue;
    hidden.push_back(EmptyTensor(*alloc, DType::kBF16, {t, c.hidden_size}));
    caps.push_back({l, hidden.back().view()});
  }
  ASSERT_FALSE(caps.empty()) << "no hidden.{i} in " << g.file;
  kernels::Tensor logits = EmptyTensor(*alloc, DType::kF32, {t, c.vocab_size});
  ASSERT_TRUE((*target)->Forward({ids_t, pos_t, cu_t, max_seqlen}, caps, logits).ok());
  ASSERT_TRUE(kernels::SynchronizeStream(device, stream).ok());

  for (const LayerCapture& cap : caps) {
    const std::string name = "hidden." + std::to_string(cap.layer);
    const std::vector<kernels::bf16> got_bf = kernels::testing::ToHost<kernels::bf16>(cap.out);
    std::vector<float> got;
    for (kernels::bf16 x : got_bf) got.push_back(x.f());
    EXPECT_TRUE(AsAccurateAsTransformers(got, ReadF32(*reader, name),
                                         ReadF32(*reader, "bf16_hf." + name), name));
  }
  EXPECT_TRUE(AsAccurateAsTransformers(kernels::testing::ToHost<float>(logits),
                                       ReadF32(*reader, "logits"),
                                       ReadF32(*reader, "bf16_hf.logits"), "logits"));
  if (c.moe)
    CheckRouterAgreement(**target, *reader, {ids_t, pos_t, cu_t, max_seqlen}, *alloc, device,
                         stream);
}

}  // namespace tandem::models::testing
