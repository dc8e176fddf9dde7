// Test utilities for the mixture-of-experts hybrid (qwen3_5_moe): a tiny config, host
// checkpoints of random weights in either expert layout, writing them as an HF directory,
// and a CPU forward capturing every layer. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/core/dtype.h"
#include "kernels/testing/testing.h"
#include "models/io/model_test_util.h"
#include "models/io/safetensors_writer.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_weights.h"

namespace tandem::models::testing {

// A text-only qwen3_5_moe: hidden 64, 4 layers (layer 3 gated attention), 6 experts of width
// 16, top-2, a shared expert of width 24.
inline nlohmann::json TinyMoeText() {
  return nlohmann::json::parse(R"({
    "model_type": "qwen3_5_moe_text", "architectures": ["Qwen3_5MoeForCausalLM"],
    "vocab_size": 96, "hidden_size": 64, "num_hidden_layers": 4, "full_attention_interval": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 512, "tie_word_embeddings": false,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.25},
    "num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 24})");
}

// TinyMoeText parsed. (Not named TinyMoeConfig: qwen3_test_util.h's qwen3_moe config has that
// name in this namespace, and the speculative tests link both.)
inline Qwen35Config TinyHybridMoeConfig() {
  Result<Qwen35Config> c = ParseQwen35Config(TinyMoeText(), "tiny_moe/config.json");
  TANDEM_CHECK_OK(c.status());
  return std::move(c).value();
}

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<kernels::bf16> values;
};
using HostCheckpoint = std::map<std::string, HostTensor>;

// Random values for every tensor of `c` (experts fused): matrices uniform in +-1/sqrt(in),
// zero-centred norms in +-0.1, the gated norm in [0.8, 1.2), A_log and dt_bias in [0, 1),
// the embedding and LM head in +-0.5.
inline HostCheckpoint RandomCheckpoint(const Qwen35Config& c, uint32_t seed) {
  std::mt19937 rng(seed);
  HostCheckpoint out;
  for (const WeightSpec& s : Qwen35WeightSpecs(c, ExpertLayout::kFused)) {
    float lo, hi;
    if (s.name.ends_with("A_log") || s.name.ends_with("dt_bias")) {
      lo = 0.f, hi = 1.f;
    } else if (s.name.ends_with("linear_attn.norm.weight")) {
      lo = 0.8f, hi = 1.2f;
    } else if (s.shape.size() == 1) {
      lo = -0.1f, hi = 0.1f;
    } else if (s.name.ends_with("embed_tokens.weight") || s.name == "lm_head.weight") {
      lo = -0.5f, hi = 0.5f;
    } else {
      hi = 1.f / std::sqrt(static_cast<float>(s.shape.back()));
      lo = -hi;
    }
    std::uniform_real_distribution<float> u(lo, hi);
    HostTensor t{s.shape, {}};
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    for (int64_t i = 0; i < n; ++i) t.values.push_back(kernels::bf16(u(rng)));
    out[s.name] = std::move(t);
  }
  return out;
}

// `fused`'s experts split into one tensor per expert and projection (the released
// checkpoints' layout).
inline HostCheckpoint PerExpert(const HostCheckpoint& fused, const Qwen35Config& c) {
  const int64_t e = c.moe->num_experts, i = c.moe->moe_intermediate_size, h = c.hidden_size;
  HostCheckpoint out;
  for (const auto& [name, t] : fused) {
    const size_t at = name.find("mlp.experts.");
    if (at == std::string::npos) {
      out[name] = t;
      continue;
    }
    const std::string p = name.substr(0, at + 12);  // "...mlp.experts."
    const bool gate_up = name.ends_with("gate_up_proj");
    for (int64_t x = 0; x < e; ++x) {
      auto rows = [&](int64_t first, int64_t count, int64_t cols) {
        return std::vector<kernels::bf16>(t.values.begin() + first * cols,
                                          t.values.begin() + (first + count) * cols);
      };
      if (gate_up) {
        out[fmt::format("{}{}.gate_proj.weight", p, x)] = {{i, h}, rows(x * 2 * i, i, h)};
        out[fmt::format("{}{}.up_proj.weight", p, x)] = {{i, h}, rows(x * 2 * i + i, i, h)};
      } else {
        out[fmt::format("{}{}.down_proj.weight", p, x)] = {{h, i}, rows(x * h, h, i)};
      }
    }
  }
  return out;
}

// `w` as model.safetensors plus config.json `config` in `dir`.
inline void WriteCheckpoint(const std::string& dir, const nlohmann::json& config,
                            const HostCheckpoint& w) {
  std::vector<TensorToWrite> out;
  for (const auto& [name, t] : w)
    out.push_back({name, kernels::DType::kBF16, t.shape,
                   std::as_bytes(std::span<const kernels::bf16>(t.values))});
  TANDEM_CHECK_OK(WriteSafetensors(dir + "/model.safetensors", out));
  WriteRaw(dir + "/config.json", config.dump());
}

// `w` in the official FP8 layout (plus config.json `config` with its quantization_config):
// every layer matrix but the router, the shared expert's gate and in_proj_b / in_proj_a as
// F8_E4M3 with its F32 `weight_scale_inv` [ceil(N/128), ceil(K/128)], except that the scale
// of `drop_scale` (a weight name) is left out.
inline void WriteFp8Checkpoint(const std::string& dir, nlohmann::json config,
                               const HostCheckpoint& w, const std::string& drop_scale = "") {
  std::vector<TensorToWrite> out;
  std::vector<std::vector<uint8_t>> codes;
  std::vector<std::vector<float>> scales;
  codes.reserve(w.size());
  scales.reserve(w.size());
  for (const auto& [name, t] : w) {
    const bool fp8 = t.shape.size() == 2 && name.find(".layers.") != std::string::npos &&
                     !name.ends_with("mlp.gate.weight") &&
                     !name.ends_with("shared_expert_gate.weight") &&
                     name.find("in_proj_b") == std::string::npos &&
                     name.find("in_proj_a") == std::string::npos;
    if (!fp8) {
      out.push_back({name, kernels::DType::kBF16, t.shape,
                     std::as_bytes(std::span<const kernels::bf16>(t.values))});
      continue;
    }
    const int64_t n = t.shape[0], k = t.shape[1], nb = kernels::Fp8Blocks(n),
                  kb = kernels::Fp8Blocks(k), ld = kernels::Fp8WeightScaleLd(k);
    std::vector<kernels::bf16> src = t.values;
    std::vector<float> padded(nb * ld);
    codes.emplace_back(n * k);
    const kernels::Fp8BlockWeight q{
        kernels::TensorView(codes.back().data(), kernels::DType::kF8E4M3, {n, k}),
        kernels::TensorView(padded.data(), kernels::DType::kF32, {nb, ld})};
    TANDEM_CHECK_OK(kernels::cpu::QuantizeFp8Weight(
        kernels::TensorView(src.data(), kernels::DType::kBF16, {n, k}), q, nullptr));
    scales.emplace_back();
    for (int64_t r = 0; r < nb; ++r)
      for (int64_t c = 0; c < kb; ++c) scales.back().push_back(padded[r * ld + c]);
    out.push_back({name, kernels::DType::kF8E4M3, t.shape,
                   std::as_bytes(std::span<const uint8_t>(codes.back()))});
    if (name != drop_scale)
      out.push_back({name + "_scale_inv", kernels::DType::kF32, {nb, kb},
                     std::as_bytes(std::span<const float>(scales.back()))});
  }
  TANDEM_CHECK_OK(WriteSafetensors(dir + "/model.safetensors", out));
  config["quantization_config"] = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {128, 128}}};
  WriteRaw(dir + "/config.json", config.dump());
}

// A packed batch of `lengths` documents (host), token ids from a fixed rule.
struct HostHybridBatch {
  std::vector<int32_t> ids, pos, cu;
  HybridBatch View() {
    const int64_t t = static_cast<int64_t>(ids.size());
    return {kernels::TensorView(ids.data(), kernels::DType::kI32, {t}),
            kernels::TensorView(pos.data(), kernels::DType::kI32, {t}),
            kernels::TensorView(cu.data(), kernels::DType::kI32,
                                {static_cast<int64_t>(cu.size())}),
            0};
  }
};
inline HostHybridBatch MakeHybridBatch(const std::vector<int>& lengths, int64_t vocab) {
  HostHybridBatch b;
  b.cu.push_back(0);
  for (int n : lengths) {
    for (int i = 0; i < n; ++i) {
      b.ids.push_back(static_cast<int32_t>((b.ids.size() * 37 + 11) % vocab));
      b.pos.push_back(i);
    }
    b.cu.push_back(static_cast<int32_t>(b.ids.size()));
  }
  return b;
}

// Every layer's output of `target` (CPU) on `b`.
inline std::vector<std::vector<kernels::bf16>> ForwardAll(Qwen35Target& target,
                                                          HostHybridBatch& b) {
  const Qwen35Config& c = target.config();
  const int64_t t = static_cast<int64_t>(b.ids.size()), h = c.hidden_size;
  std::vector<std::vector<kernels::bf16>> out(c.num_hidden_layers,
                                              std::vector<kernels::bf16>(t * h));
  std::vector<HybridCapture> caps;
  for (int l = 0; l < c.num_hidden_layers; ++l)
    caps.push_back({l, kernels::TensorView(out[l].data(), kernels::DType::kBF16, {t, h})});
  const Status st = target.Forward(b.View(), caps);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

}  // namespace tandem::models::testing
