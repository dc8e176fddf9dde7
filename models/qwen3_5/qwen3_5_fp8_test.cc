// The hybrid target with precision = "fp8" on the CPU (reference FP8 GEMMs, kernels/gemm/
// fp8.h): the projections are quantized as each layer loads, never kept in bf16 (the
// weights shrink by what the e4m3 form saves), with the same codes as quantizing after a
// whole load; the workspace matches WorkspaceBytes, and the golden batch's
// captures stay within FP8's error of the fp32 reference: further than bf16's (so the FP8
// path really ran) but within e4m3's 16x of bf16's error at every layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <map>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/core/memory.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/fp8_format.h"
#include "models/io/file_util.h"
#include "models/io/model_test_util.h"
#include "models/io/safetensors_writer.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::TensorView;
using testing::kDir;
using testing::kGolden;
using testing::Read;

constexpr int64_t kMaxTokens = 256;

std::unique_ptr<Qwen35Target> Load(TargetPrecision precision) {
  auto t = Qwen35Target::Load(kDir, kernels::HostAllocator(),
                              {.max_tokens = kMaxTokens, .precision = precision});
  TANDEM_CHECK_OK(t.status());
  return std::move(t).value();
}

// Every layer's capture of the golden batch.
std::vector<std::vector<bf16>> Captures(Qwen35Target& target, const SafetensorsReader& golden) {
  std::vector<int32_t> ids = Read<int32_t>(golden, "input_ids", DType::kI32),
                       pos = Read<int32_t>(golden, "position_ids", DType::kI32),
                       cu = Read<int32_t>(golden, "cu_seqlens", DType::kI32);
  const int64_t t = static_cast<int64_t>(ids.size()), h = target.config().hidden_size;
  std::vector<std::vector<bf16>> out(target.config().num_hidden_layers,
                                     std::vector<bf16>(t * h));
  std::vector<HybridCapture> caps;
  for (size_t l = 0; l < out.size(); ++l)
    caps.push_back({static_cast<int>(l), TensorView(out[l].data(), DType::kBF16, {t, h})});
  const Status st = target.Forward({TensorView(ids.data(), DType::kI32, {t}),
                                    TensorView(pos.data(), DType::kI32, {t}),
                                    TensorView(cu.data(), DType::kI32,
                                               {static_cast<int64_t>(cu.size())})},
                                   caps);
  TANDEM_CHECK_OK(st);
  return out;
}

double RelativeL2(const std::vector<bf16>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = static_cast<double>(got[i].f()) - ref[i];
    num += e * e;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

TEST(Qwen35Fp8Test, ProjectionsAreQuantizedAndTheirBf16FormFreed) {
  auto bf16_target = Load(TargetPrecision::kBf16);
  auto fp8_target = Load(TargetPrecision::kFp8);
  const Qwen35Config& c = fp8_target->config();
  EXPECT_TRUE(bf16_target->weights().has_projections());
  EXPECT_FALSE(fp8_target->weights().has_projections());
  EXPECT_TRUE(fp8_target->weights().layers()[0].linear.in_proj.empty());
  EXPECT_EQ(fp8_target->fp8_projections().nbytes(), Qwen35Fp8Projections::Bytes(c));
  ASSERT_EQ(fp8_target->fp8_projections().layers().size(),
            static_cast<size_t>(c.num_hidden_layers));
  // The freed bf16 matrices take at least what their e4m3 codes need twice over.
  EXPECT_LT(fp8_target->weights().nbytes() + fp8_target->fp8_projections().nbytes() / 2,
            bf16_target->weights().nbytes());
  EXPECT_EQ(fp8_target->workspace_bytes(),
            Qwen35Target::WorkspaceBytes(c, kMaxTokens, /*on_cuda=*/false, TargetPrecision::kFp8));
  // fp8 adds the e4m3 input buffer and drops the bf16 outputs of the gated norm and SwiGLU
  // (both write e4m3 themselves): smaller on the whole, here as at the 27B shape.
  EXPECT_LT(fp8_target->workspace_bytes(), bf16_target->workspace_bytes());
  // Quantizing again needs the bf16 form.
  auto again = Qwen35Fp8Projections::Quantize(fp8_target->weights(), nullptr);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().ToString().find("released"), std::string::npos);
}

// Every e4m3 code and scale of two FP8 forms of one model.
void ExpectSameFp8(const Qwen35Fp8Projections& a, const Qwen35Fp8Projections& b) {
  ASSERT_EQ(a.layers().size(), b.layers().size());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  auto same = [](const kernels::Fp8BlockWeight& x, const kernels::Fp8BlockWeight& y) {
    if (x.data.empty() || y.data.empty()) return x.data.empty() == y.data.empty();
    return x.data.nbytes() == y.data.nbytes() && x.scale.nbytes() == y.scale.nbytes() &&
           std::memcmp(x.data.data(), y.data.data(), x.data.nbytes()) == 0 &&
           std::memcmp(x.scale.data(), y.scale.data(), x.scale.nbytes()) == 0;
  };
  for (size_t l = 0; l < a.layers().size(); ++l) {
    const Qwen35Fp8Layer &x = a.layers()[l], &y = b.layers()[l];
    EXPECT_TRUE(same(x.in_proj, y.in_proj) && same(x.out_proj, y.out_proj) &&
                same(x.q_proj, y.q_proj) && same(x.k_proj, y.k_proj) && same(x.v_proj, y.v_proj) &&
                same(x.o_proj, y.o_proj) && same(x.gate_up, y.gate_up) &&
                same(x.down_proj, y.down_proj))
        << "layer " << l;
  }
}

// Load and Random quantize each layer as it arrives (a Qwen35ProjectionSink): the same codes
// and scales as quantizing the whole bf16 model after loading it.
TEST(Qwen35Fp8Test, LayerByLayerQuantizeEqualsQuantizeAfterLoad) {
  auto staged = Load(TargetPrecision::kFp8);  // Qwen35Target::Load: layer by layer
  auto config = LoadQwen35Config(kDir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto reader = SafetensorsReader::Open(kDir);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto whole = Qwen35Weights::Load(*config, *reader, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto after = Qwen35Fp8Projections::Quantize(*whole, nullptr);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ExpectSameFp8(staged->fp8_projections(), *after);

  auto random = Qwen35Target::Random(*config, kernels::HostAllocator(), 9,
                                     {.max_tokens = 16, .precision = TargetPrecision::kFp8});
  ASSERT_TRUE(random.ok()) << random.status().ToString();
  auto random_whole = Qwen35Weights::Random(*config, kernels::HostAllocator(), 9, nullptr);
  ASSERT_TRUE(random_whole.ok()) << random_whole.status().ToString();
  auto random_after = Qwen35Fp8Projections::Quantize(*random_whole, nullptr);
  ASSERT_TRUE(random_after.ok()) << random_after.status().ToString();
  ExpectSameFp8((*random)->fp8_projections(), *random_after);
  // The rest of the weights (embedding, norms, conv, gates) is the same too.
  const TensorView e1 = (*random)->weights().embed(), e2 = random_whole->embed();
  EXPECT_EQ(std::memcmp(e1.data(), e2.data(), e1.nbytes()), 0);
  const TensorView c1 = (*random)->weights().layers()[0].linear.conv1d,
                   c2 = random_whole->layers()[0].linear.conv1d;
  EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.nbytes()), 0);
}

// A checkpoint whose shards interleave the layers (every layer's MLP in a second shard read
// after the first): every layer's staging buffer is open at once, and each is handed on
// when its last projection arrives; the codes are those of a whole load.
TEST(Qwen35Fp8Test, LayersSplitAcrossShardsQuantizeLikeAWholeLoad) {
  testing::ScratchDir dir;
  auto reader = SafetensorsReader::Open(kDir);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<TensorToWrite> first, second;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const TensorInfo& t : reader->tensors()) {
    const bool mlp = t.name.find(".mlp.") != std::string::npos;
    (mlp ? second : first).push_back({t.name, t.dtype, t.shape, reader->Bytes(t)});
    weight_map[t.name] = mlp ? "model-00002-of-00002.safetensors"
                             : "model-00001-of-00002.safetensors";
  }
  ASSERT_TRUE(WriteSafetensors(dir.path() + "/model-00001-of-00002.safetensors", first).ok());
  ASSERT_TRUE(WriteSafetensors(dir.path() + "/model-00002-of-00002.safetensors", second).ok());
  testing::WriteRaw(dir.path() + "/model.safetensors.index.json",
                    nlohmann::json{{"metadata", nlohmann::json::object()},
                                   {"weight_map", weight_map}}
                        .dump());
  auto config = ReadTextFile(kDir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  testing::WriteRaw(dir.path() + "/config.json", *config);

  auto split = Qwen35Target::Load(dir.path(), kernels::HostAllocator(),
                                  {.max_tokens = 16, .precision = TargetPrecision::kFp8});
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  auto parsed = LoadQwen35Config(kDir);
  ASSERT_TRUE(parsed.ok());
  auto whole = Qwen35Weights::Load(*parsed, *reader, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto after = Qwen35Fp8Projections::Quantize(*whole, nullptr);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ExpectSameFp8((*split)->fp8_projections(), *after);
}

// The e4m3 codes and checkpoint scales of one matrix of the rewritten checkpoint.
struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;  // [ceil(n/128), ceil(k/128)]
};

// Writes the tiny checkpoint into `dir` in the official FP8 layout (see the test below);
// returns each quantized matrix by name.
std::map<std::string, Quantized> WriteFp8Checkpoint(const std::string& dir) {
  auto reader = SafetensorsReader::Open(kDir);
  TANDEM_CHECK_OK(reader.status());
  std::map<std::string, Quantized> quantized;
  std::vector<TensorToWrite> out;
  for (const TensorInfo& t : reader->tensors()) {
    const bool matrix = t.shape.size() == 2 && t.name.find(".layers.") != std::string::npos &&
                        t.name.find("in_proj_b") == std::string::npos &&
                        t.name.find("in_proj_a") == std::string::npos;
    if (!matrix) {
      out.push_back({t.name, t.dtype, t.shape, reader->Bytes(t)});
      continue;
    }
    const int64_t n = t.shape[0], k = t.shape[1];
    std::vector<float> w(n * k);
    TANDEM_CHECK_OK(reader->Read(t, DType::kF32, w.data(), n * k * 4));
    const int64_t nb = kernels::Fp8Blocks(n), kb = kernels::Fp8Blocks(k),
                  ld = kernels::Fp8WeightScaleLd(k);
    Quantized& dst = quantized[t.name];
    dst.codes.resize(n * k);
    std::vector<float> padded(nb * ld);
    const kernels::Fp8BlockWeight q{TensorView(dst.codes.data(), DType::kF8E4M3, {n, k}),
                                    TensorView(padded.data(), DType::kF32, {nb, ld})};
    TANDEM_CHECK_OK(kernels::cpu::QuantizeFp8Weight(TensorView(w.data(), DType::kF32, {n, k}),
                                                    q, nullptr));
    for (int64_t r = 0; r < nb; ++r)
      for (int64_t c = 0; c < kb; ++c) dst.scale_inv.push_back(padded[r * ld + c]);
  }
  for (const auto& [name, qz] : quantized) {
    const TensorInfo* t = reader->Find(name);
    out.push_back({name, DType::kF8E4M3, t->shape, std::as_bytes(std::span(qz.codes))});
    out.push_back({name + "_scale_inv", DType::kF32,
                   {kernels::Fp8Blocks(t->shape[0]), kernels::Fp8Blocks(t->shape[1])},
                   std::as_bytes(std::span(qz.scale_inv))});
  }
  TANDEM_CHECK_OK(WriteSafetensors(dir + "/model.safetensors", out));
  auto config_text = ReadTextFile(kDir + "/config.json");
  TANDEM_CHECK_OK(config_text.status());
  nlohmann::json config = nlohmann::json::parse(*config_text);
  config["quantization_config"] = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {128, 128}}};
  testing::WriteRaw(dir + "/config.json", config.dump());
  return quantized;
}

// The tiny checkpoint rewritten in the official FP8 layout (quantization_config at the
// wrapper's top level; every matrix but in_proj_b / in_proj_a, which stay bf16 as the
// official checkpoints keep small modules, as F8_E4M3 with its F32 weight_scale_inv).
// Loaded in bf16, each matrix is its dequantized value exactly; loaded in fp8, a matrix that
// is one GEMM on its own (out_proj, k/v/o_proj, down_proj) gets back the checkpoint's codes
// (re-quantizing e4m3 * scale with the same blocks), except where bf16 rounding of a block's
// largest value moves its scale.
TEST(Qwen35Fp8Test, LoadsAnOfficialLayoutFp8Checkpoint) {
  testing::ScratchDir dir;
  const std::map<std::string, Quantized> quantized = WriteFp8Checkpoint(dir.path());
  auto bf16_target =
      Qwen35Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = 16});
  ASSERT_TRUE(bf16_target.ok()) << bf16_target.status().ToString();
  auto fp8_target = Qwen35Target::Load(dir.path(), kernels::HostAllocator(),
                                       {.max_tokens = 16, .precision = TargetPrecision::kFp8});
  ASSERT_TRUE(fp8_target.ok()) << fp8_target.status().ToString();
  const Qwen35Config& c = (*bf16_target)->config();
  ASSERT_TRUE(c.fp8_block_weights);
  int64_t same = 0, total = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("{}layers.{}.", c.weight_prefix, l);
    const Qwen35LayerWeights& w = (*bf16_target)->weights().layers()[l];
    const Qwen35Fp8Layer& f = (*fp8_target)->fp8_projections().layers()[l];
    const bool linear = w.type == HybridLayerType::kLinearAttention;
    const std::pair<std::string, std::pair<TensorView, kernels::Fp8BlockWeight>> alone[] = {
        {p + "mlp.down_proj.weight", {w.down_proj, f.down_proj}},
        {p + (linear ? "linear_attn.out_proj.weight" : "self_attn.o_proj.weight"),
         {linear ? w.linear.out_proj : w.attn.o_proj, linear ? f.out_proj : f.o_proj}}};
    for (const auto& [name, views] : alone) {
      const Quantized& qz = quantized.at(name);
      const auto& [bf16_view, fp8_weight] = views;
      const int64_t n = bf16_view.dim(0), k = bf16_view.dim(1), kb = kernels::Fp8Blocks(k);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t col = 0; col < k; ++col) {
          const float want = kernels::E4m3ToFloat(qz.codes[r * k + col]) *
                             qz.scale_inv[(r / 128) * kb + col / 128];
          ASSERT_EQ(bf16_view.data_as<const bf16>()[r * k + col].f(), bf16(want).f())
              << name << " [" << r << ", " << col << "]";
        }
      const uint8_t* codes = fp8_weight.data.data_as<const uint8_t>();
      for (int64_t i = 0; i < n * k; ++i) same += codes[i] == qz.codes[i];
      total += n * k;
    }
  }
  std::printf("fp8 re-quantized codes equal to the checkpoint's: %lld of %lld\n",
              static_cast<long long>(same), static_cast<long long>(total));
  EXPECT_GT(same, total * 95 / 100);
}

TEST(Qwen35Fp8Test, GoldenCapturesWithinFp8ErrorOfTheReference) {
  auto golden = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  auto bf16_target = Load(TargetPrecision::kBf16);
  auto fp8_target = Load(TargetPrecision::kFp8);
  const auto bf16 = Captures(*bf16_target, *golden);
  const auto fp8 = Captures(*fp8_target, *golden);
  for (size_t l = 0; l < fp8.size(); ++l) {
    const std::string name = "hidden." + std::to_string(l);
    const std::vector<float> ref = Read<float>(*golden, name, DType::kF32);
    const double e8 = RelativeL2(fp8[l], ref), e16 = RelativeL2(bf16[l], ref);
    std::printf("%s: relative L2 to fp32, fp8 %.4f, bf16 %.4f\n", name.c_str(), e8, e16);
    // e4m3 keeps 3 mantissa bits to bf16's 7: its rounding error is 16x bf16's, and every
    // layer's error against fp32 stays within that factor of the bf16 forward's (measured:
    // 9-14x on this tiny random model, whose layers amplify noise; a wrong scale or layout
    // gives errors near 1). Above 2x: the FP8 path really ran.
    EXPECT_GT(e8, 2 * e16) << name;
    EXPECT_LT(e8, 16 * e16) << name;
  }
}

}  // namespace
}  // namespace tandem::models
