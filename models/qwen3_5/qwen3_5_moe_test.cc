// The mixture-of-experts hybrid (model_type qwen3_5_moe / qwen3_5_moe_text) on the CPU: its
// config (a Qwen3.6-35B-A3B-shaped wrapper, the text-only layout, every refusal naming the
// file and the key), both expert layouts and both name layouts loading the same model, the
// MoE block against a dense hybrid that computes the same function (identical experts, a
// zero shared-expert gate), the loader's errors, FP8 (from bf16 and official FP8
// checkpoints) and random weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/testing/testing.h"
#include "models/qwen3_5/qwen3_5_config.h"
#include "models/qwen3_5/qwen3_5_moe_test_util.h"
#include "models/qwen3_5/qwen3_5_target.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;
using kernels::bf16;
using testing::HostCheckpoint;
using testing::ScratchDir;

// The text_config of Qwen3.6-35B-A3B (the fields its config.json carries).
json Text35BA3B() {
  return json::parse(R"({
    "model_type": "qwen3_5_moe_text", "attention_bias": false, "attn_output_gate": true,
    "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4,
    "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "moe_intermediate_size": 512,
    "mtp_num_hidden_layers": 1, "num_attention_heads": 16, "num_experts": 256,
    "num_experts_per_tok": 8, "num_hidden_layers": 40, "num_key_value_heads": 2,
    "output_router_logits": false, "rms_norm_eps": 1e-06, "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512, "vocab_size": 248320,
    "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10],
                        "rope_type": "default", "rope_theta": 10000000,
                        "partial_rotary_factor": 0.25}})");
}

json MoeWrapper(json text) {
  json j = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
            {"model_type", "qwen3_5_moe"},
            {"tie_word_embeddings", false},
            {"vision_config", {{"depth", 27}, {"hidden_size", 1152}}}};
  j["text_config"] = std::move(text);
  return j;
}

// ||a - b|| / ||b||.
double RelL2(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i].f()) - b[i].f();
    num += d * d;
    den += static_cast<double>(b[i].f()) * b[i].f();
  }
  return std::sqrt(num / den);
}

std::string ErrorOf(const json& j) {
  Result<Qwen35Config> c = ParseQwen35Config(j, "/m/config.json");
  return c.ok() ? std::string("OK") : c.status().ToString();
}

TEST(Qwen35MoeConfigTest, Wrapper35BA3BShape) {
  Result<Qwen35Config> c = ParseQwen35Config(MoeWrapper(Text35BA3B()), "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "qwen3_5_moe");
  EXPECT_EQ(c->weight_prefix, "model.language_model.");
  ASSERT_TRUE(c->moe.has_value());
  EXPECT_EQ(c->moe->num_experts, 256);
  EXPECT_EQ(c->moe->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe->moe_intermediate_size, 512);
  EXPECT_EQ(c->moe->shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c->moe->norm_topk_prob);  // transformers' router always renormalises
  EXPECT_EQ(c->intermediate_size, 0);   // no dense MLP
  EXPECT_EQ(c->layer_types[3], HybridLayerType::kFullAttention);
  EXPECT_EQ(c->layer_types[38], HybridLayerType::kLinearAttention);
  // 35B parameters: the experts are 32.2B of them.
  int64_t params = 0;
  for (const WeightSpec& s : Qwen35WeightSpecs(*c)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    params += n;
  }
  EXPECT_GT(params, 34'000'000'000);
  EXPECT_LT(params, 36'000'000'000);

  json text = Text35BA3B();
  text["architectures"] = {"Qwen3_5MoeForCausalLM"};
  text["intermediate_size"] = 6144;  // kept as the drafter's MLP width; the target has none
  c = ParseQwen35Config(text, "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->weight_prefix, "model.");
  EXPECT_EQ(c->intermediate_size, 6144);
  EXPECT_EQ(Qwen35Target::WorkspaceBytes(*c, 64, false),
            Qwen35Target::WorkspaceBytes(*ParseQwen35Config(Text35BA3B(), "x"), 64, false));
  // The keys transformers drops are accepted at the values it runs.
  text["norm_topk_prob"] = true;
  text["decoder_sparse_step"] = 1;
  text["mlp_only_layers"] = json::array();
  EXPECT_EQ(ErrorOf(text), "OK");
}

TEST(Qwen35MoeConfigTest, RefusesWhatIsNotImplemented) {
  auto text_with = [](const char* key, json value) {
    json t = Text35BA3B();
    t[key] = std::move(value);
    return MoeWrapper(t);
  };
  json no_shared = Text35BA3B();
  no_shared.erase("shared_expert_intermediate_size");
  json dense_text = MoeWrapper(Text35BA3B());
  dense_text["text_config"]["model_type"] = "qwen3_5_text";
  const struct {
    const char* what;
    json config;
    const char* expect;
  } cases[] = {
      {"dense layers", text_with("mlp_only_layers", {1}), "'text_config.mlp_only_layers'"},
      {"sparse step", text_with("decoder_sparse_step", 2), "'text_config.decoder_sparse_step'"},
      {"top-k", text_with("num_experts_per_tok", 300), "top-k 300 must be in 1..num_experts 256"},
      {"experts", text_with("num_experts", 0), "'text_config.num_experts'"},
      {"unnormalised", text_with("norm_topk_prob", false), "always renormalises"},
      {"no shared expert", MoeWrapper(no_shared),
       "'text_config.shared_expert_intermediate_size': missing"},
      {"text type", dense_text, "is not qwen3_5_moe_text"},
  };
  for (const auto& c : cases) {
    const std::string msg = ErrorOf(c.config);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find("/m/config.json"), std::string::npos) << c.what << ": " << msg;
  }
  // A dense hybrid with expert keys points at the MoE model_type.
  json dense = Text35BA3B();
  dense["model_type"] = "qwen3_5_text";
  dense["intermediate_size"] = 6144;
  EXPECT_NE(ErrorOf(dense).find("model_type qwen3_5_moe"), std::string::npos) << ErrorOf(dense);
}

std::unique_ptr<Qwen35Target> Load(const std::string& dir) {
  auto t = Qwen35Target::Load(dir, kernels::HostAllocator(), {.max_tokens = 64});
  TANDEM_CHECK_OK(t.status());
  return std::move(t).value();
}

// The wrapper's names for a text-only checkpoint's tensors.
HostCheckpoint WrapperNames(const HostCheckpoint& w) {
  HostCheckpoint out;
  for (const auto& [name, t] : w)
    out[name.starts_with("model.") ? "model.language_model." + name.substr(6) : name] = t;
  return out;
}

TEST(Qwen35MoeTargetTest, EveryLayoutLoadsTheSameModel) {
  const Qwen35Config cfg = testing::TinyHybridMoeConfig();
  const HostCheckpoint fused = testing::RandomCheckpoint(cfg, 7);
  json wrapper = {{"model_type", "qwen3_5_moe"}, {"text_config", testing::TinyMoeText()}};
  ScratchDir a, b, w;
  testing::WriteCheckpoint(a.path(), testing::TinyMoeText(), fused);
  testing::WriteCheckpoint(b.path(), testing::TinyMoeText(), testing::PerExpert(fused, cfg));
  testing::WriteCheckpoint(w.path(), wrapper, WrapperNames(testing::PerExpert(fused, cfg)));
  auto ta = Load(a.path()), tb = Load(b.path()), tw = Load(w.path());
  EXPECT_EQ(tw->config().weight_prefix, "model.language_model.");
  testing::HostHybridBatch batch = testing::MakeHybridBatch({13, 1, 20}, cfg.vocab_size);
  const auto ha = testing::ForwardAll(*ta, batch), hb = testing::ForwardAll(*tb, batch),
             hw = testing::ForwardAll(*tw, batch);
  for (size_t l = 0; l < ha.size(); ++l) {
    EXPECT_TRUE(kernels::testing::BitEqual(ha[l], hb[l])) << "layer " << l;
    EXPECT_TRUE(kernels::testing::BitEqual(ha[l], hw[l])) << "layer " << l;
    for (const bf16& x : ha[l]) ASSERT_TRUE(std::isfinite(x.f())) << "layer " << l;
  }
  EXPECT_EQ(ta->workspace_bytes(), Qwen35Target::WorkspaceBytes(cfg, 64, false));
  ASSERT_NE(ta->moe(), nullptr);
}

// With every expert equal to expert 0 and a zero shared-expert gate (sigmoid 0.5), the MoE
// block is expert0(x) + 0.5 shared(x) for any routing whose weights sum to 1: the dense MLP
// of width I + Is whose gate and up rows are expert 0's and the shared expert's, and whose
// down columns are expert 0's and half the shared expert's.
TEST(Qwen35MoeTargetTest, MatchesTheDenseHybridOfTheSameFunction) {
  const Qwen35Config cfg = testing::TinyHybridMoeConfig();
  const int64_t h = cfg.hidden_size, e = cfg.moe->num_experts, i = cfg.moe->moe_intermediate_size,
                is = cfg.moe->shared_expert_intermediate_size;
  HostCheckpoint moe = testing::RandomCheckpoint(cfg, 11);
  json dense_cfg = testing::TinyMoeText();
  dense_cfg["model_type"] = "qwen3_5_text";
  for (const char* k : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                        "shared_expert_intermediate_size"})
    dense_cfg.erase(k);
  dense_cfg["intermediate_size"] = i + is;
  HostCheckpoint dense, half_gate_ignored;
  for (const auto& [name, t] : moe)
    if (name.find(".mlp.") == std::string::npos) dense[name] = t;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.", l);
    std::vector<bf16>& gu = moe[p + "experts.gate_up_proj"].values;
    std::vector<bf16>& down = moe[p + "experts.down_proj"].values;
    for (int64_t x = 1; x < e; ++x) {
      std::copy(gu.begin(), gu.begin() + 2 * i * h, gu.begin() + x * 2 * i * h);
      std::copy(down.begin(), down.begin() + h * i, down.begin() + x * h * i);
    }
    for (bf16& g : moe[p + "shared_expert_gate.weight"].values) g = bf16(0.f);
    const std::vector<bf16>& sg = moe[p + "shared_expert.gate_proj.weight"].values;
    const std::vector<bf16>& su = moe[p + "shared_expert.up_proj.weight"].values;
    const std::vector<bf16>& sd = moe[p + "shared_expert.down_proj.weight"].values;
    std::vector<bf16> gate(gu.begin(), gu.begin() + i * h), up(gu.begin() + i * h,
                                                                 gu.begin() + 2 * i * h);
    gate.insert(gate.end(), sg.begin(), sg.end());
    up.insert(up.end(), su.begin(), su.end());
    std::vector<bf16> d, d_ungated;
    for (int64_t r = 0; r < h; ++r) {
      for (int64_t k = 0; k < i; ++k) d.push_back(down[r * i + k]);
      for (int64_t k = 0; k < is; ++k) d.push_back(bf16(0.5f * sd[r * is + k].f()));
    }
    d_ungated = d;
    for (int64_t r = 0; r < h; ++r)
      for (int64_t k = 0; k < is; ++k) d_ungated[r * (i + is) + i + k] = sd[r * is + k];
    dense[p + "gate_proj.weight"] = {{i + is, h}, gate};
    dense[p + "up_proj.weight"] = {{i + is, h}, up};
    dense[p + "down_proj.weight"] = {{h, i + is}, d};
    half_gate_ignored[p + "down_proj.weight"] = {{h, i + is}, d_ungated};
  }
  HostCheckpoint ungated = dense;
  for (const auto& [name, t] : half_gate_ignored) ungated[name] = t;
  ScratchDir m, d, u;
  testing::WriteCheckpoint(m.path(), testing::TinyMoeText(), moe);
  testing::WriteCheckpoint(d.path(), dense_cfg, dense);
  testing::WriteCheckpoint(u.path(), dense_cfg, ungated);
  testing::HostHybridBatch batch = testing::MakeHybridBatch({17, 30}, cfg.vocab_size);
  const auto got = testing::ForwardAll(*Load(m.path()), batch);
  const auto want = testing::ForwardAll(*Load(d.path()), batch);
  const auto wrong = testing::ForwardAll(*Load(u.path()), batch);
  for (size_t l = 0; l < got.size(); ++l) {
    // Only bf16 rounding differs (the MoE block rounds each expert's output).
    EXPECT_LT(RelL2(got[l], want[l]), 3e-2) << "layer " << l;
    // Sensitivity: a shared expert without its sigmoid gate is far outside that bound.
    EXPECT_GT(RelL2(wrong[l], want[l]), 0.1) << "layer " << l;
  }
}

std::string LoadError(const std::string& dir, TargetPrecision precision = TargetPrecision::kBf16) {
  auto t = Qwen35Target::Load(dir, kernels::HostAllocator(),
                              {.max_tokens = 8, .precision = precision});
  return t.ok() ? std::string() : t.status().ToString();
}

TEST(Qwen35MoeTargetTest, LoaderErrorsNameTheTensorAndTheFile) {
  const Qwen35Config cfg = testing::TinyHybridMoeConfig();
  const HostCheckpoint fused = testing::RandomCheckpoint(cfg, 3);
  const HostCheckpoint per_expert = testing::PerExpert(fused, cfg);
  {  // a missing expert tensor
    ScratchDir dir;
    HostCheckpoint w = per_expert;
    w.erase("model.layers.2.mlp.experts.4.up_proj.weight");
    testing::WriteCheckpoint(dir.path(), testing::TinyMoeText(), w);
    const std::string err = LoadError(dir.path());
    EXPECT_NE(err.find("model.layers.2.mlp.experts.4.up_proj.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
  }
  {  // a missing shared-expert tensor
    ScratchDir dir;
    HostCheckpoint w = fused;
    w.erase("model.layers.1.mlp.shared_expert_gate.weight");
    testing::WriteCheckpoint(dir.path(), testing::TinyMoeText(), w);
    const std::string err = LoadError(dir.path());
    EXPECT_NE(err.find("'model.layers.1.mlp.shared_expert_gate.weight'"), std::string::npos)
        << err;
  }
  {  // config.json names fewer experts than the per-expert checkpoint holds ...
    ScratchDir dir;
    json fewer = testing::TinyMoeText();
    fewer["num_experts"] = 4;
    testing::WriteCheckpoint(dir.path(), fewer, per_expert);
    const std::string err = LoadError(dir.path());
    EXPECT_NE(err.find("but config.json's num_experts is 4"), std::string::npos) << err;
    EXPECT_NE(err.find("model.layers.0.mlp.experts."), std::string::npos) << err;
  }
  {  // ... or more
    ScratchDir dir;
    json more = testing::TinyMoeText();
    more["num_experts"] = 8;
    testing::WriteCheckpoint(dir.path(), more, per_expert);
    const std::string err = LoadError(dir.path());
    EXPECT_NE(err.find("'model.layers.0.mlp.experts.6.gate_proj.weight'"), std::string::npos)
        << err;
    EXPECT_NE(err.find("holds 6 of the 8 experts"), std::string::npos) << err;
  }
  {  // a fused checkpoint with another expert count
    ScratchDir dir;
    json more = testing::TinyMoeText();
    more["num_experts"] = 7;
    testing::WriteCheckpoint(dir.path(), more, fused);
    const std::string err = LoadError(dir.path());
    EXPECT_NE(err.find("model.layers.0.mlp.experts.gate_up_proj"), std::string::npos) << err;
    EXPECT_NE(err.find("holds 6 experts but config.json's num_experts is 7"), std::string::npos)
        << err;
  }
  {  // an FP8 expert without its scale
    ScratchDir dir;
    testing::WriteFp8Checkpoint(dir.path(), testing::TinyMoeText(), per_expert,
                                "model.layers.1.mlp.experts.3.down_proj.weight");
    const std::string err = LoadError(dir.path(), TargetPrecision::kFp8);
    EXPECT_NE(err.find("model.layers.1.mlp.experts.3.down_proj.weight"), std::string::npos)
        << err;
    EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
  }
}

// precision = "fp8": the routed and shared experts and the attention / linear-attention
// projections in e4m3, from a bf16 checkpoint, an official-layout FP8 one (per-expert
// F8_E4M3 + weight_scale_inv) and random weights; within FP8's error of the bf16 forward.
TEST(Qwen35MoeTargetTest, Fp8LoadsAndRunsWithinFp8Error) {
  const Qwen35Config cfg = testing::TinyHybridMoeConfig();
  const HostCheckpoint per_expert = testing::PerExpert(testing::RandomCheckpoint(cfg, 5), cfg);
  ScratchDir plain, fp8;
  testing::WriteCheckpoint(plain.path(), testing::TinyMoeText(), per_expert);
  testing::WriteFp8Checkpoint(fp8.path(), testing::TinyMoeText(), per_expert);
  auto load = [](const std::string& dir, TargetPrecision precision) {
    auto t = Qwen35Target::Load(dir, kernels::HostAllocator(),
                                {.max_tokens = 48, .precision = precision});
    TANDEM_CHECK_OK(t.status());
    return std::move(t).value();
  };
  testing::HostHybridBatch batch = testing::MakeHybridBatch({17, 30}, cfg.vocab_size);
  const auto base = testing::ForwardAll(*load(plain.path(), TargetPrecision::kBf16), batch);
  auto fp8_target = load(plain.path(), TargetPrecision::kFp8);
  EXPECT_EQ(fp8_target->workspace_bytes(),
            Qwen35Target::WorkspaceBytes(cfg, 48, false, TargetPrecision::kFp8));
  EXPECT_EQ(fp8_target->fp8_projections().nbytes(), Qwen35Fp8Projections::Bytes(cfg));
  EXPECT_TRUE(fp8_target->weights().layers()[0].moe.experts.gate_up.empty());  // released
  const auto from_bf16 = testing::ForwardAll(*fp8_target, batch);
  const auto from_fp8_bf16 = testing::ForwardAll(*load(fp8.path(), TargetPrecision::kBf16), batch);
  const auto from_fp8 = testing::ForwardAll(*load(fp8.path(), TargetPrecision::kFp8), batch);
  for (size_t l = 0; l < base.size(); ++l) {
    const double run = RelL2(from_bf16[l], base[l]), weights = RelL2(from_fp8_bf16[l], base[l]);
    std::printf("layer %zu: relative L2 to bf16: fp8 %.4f, the FP8 checkpoint in bf16 %.4f\n", l,
                run, weights);
    // This tiny random model amplifies noise layer by layer (routing flips with it): the
    // checkpoint's weight rounding alone moves layer 3 by ~0.19, the FP8 forward (weights and
    // activations) by ~0.23 (measured). A wrong scale or layout gives errors near 1.
    EXPECT_LT(run, 0.35) << "layer " << l;
    EXPECT_LT(run, 1.6 * weights + 0.02) << "layer " << l;
    EXPECT_GT(run, 1e-3) << "layer " << l;  // it ran in FP8
    EXPECT_LT(weights, 0.35) << "layer " << l;
    // Re-quantizing the checkpoint's dequantized blocks gives back (nearly) its codes: the
    // FP8 forward from either checkpoint differs by its activation rounding only.
    EXPECT_LT(RelL2(from_fp8[l], from_fp8_bf16[l]), 1.6 * weights + 0.02) << "layer " << l;
  }
  for (TargetPrecision precision : {TargetPrecision::kBf16, TargetPrecision::kFp8}) {
    auto random = Qwen35Target::Random(cfg, kernels::HostAllocator(), 1,
                                       {.max_tokens = 8, .precision = precision});
    ASSERT_TRUE(random.ok()) << random.status().ToString();
    testing::HostHybridBatch small = testing::MakeHybridBatch({5}, cfg.vocab_size);
    const auto out = testing::ForwardAll(**random, small);
    for (size_t l = 0; l < out.size(); ++l)
      for (const bf16& x : out[l])
        ASSERT_TRUE(std::isfinite(x.f())) << TargetPrecisionName(precision) << " layer " << l;
  }
}

TEST(Qwen35MoeTargetTest, RandomWeightsRunAndRouteEveryToken) {
  const Qwen35Config cfg = testing::TinyHybridMoeConfig();
  auto target = Qwen35Target::Random(cfg, kernels::HostAllocator(), 3, {.max_tokens = 32});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ((*target)->workspace_bytes(), Qwen35Target::WorkspaceBytes(cfg, 32, false));
  EXPECT_GT(Qwen35Target::WorkspaceBytes(cfg, 32, false),
            kernels::MoeLayer::WorkspaceBytes(Qwen35Target::MoeShape(cfg), 32));
  testing::HostHybridBatch batch = testing::MakeHybridBatch({20}, cfg.vocab_size);
  const auto out = testing::ForwardAll(**target, batch);
  for (const bf16& x : out.back()) ASSERT_TRUE(std::isfinite(x.f()));
  const std::vector<int32_t> ids =
      kernels::testing::ToHost<int32_t>((*target)->moe()->topk_ids(20));
  ASSERT_EQ(ids.size(), 40u);
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, cfg.moe->num_experts);
  }
}

}  // namespace
}  // namespace tandem::models
