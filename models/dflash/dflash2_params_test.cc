// DFlash2 parameters on the CPU: the layout's names and shapes (z-lab's, 81 tensors for 5
// layers; a released drafter's config and header), weight decay and update groups, the
// from-scratch init (identity convolutions, zero projections, a no-op selector), and
// checkpoints: a bitwise round trip with the new names, and a shape mismatch naming the
// tensor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_test_util.h"
#include "models/io/safetensors.h"
#include "models/io/safetensors_writer.h"

namespace tandem::models {
namespace {

std::map<std::string, DFlashParamSpec> ByName(const DFlashParamLayout& l) {
  std::map<std::string, DFlashParamSpec> m;
  for (const DFlashParamSpec& s : l.specs) m[s.name] = s;
  return m;
}

TEST(DFlash2ParamsTest, LayoutHasZLabsNamesAndShapes) {
  DFlashConfig c = testing::TinyDFlash2Config();
  c.layers.num_hidden_layers = 5;
  c.layers.layer_types.assign(5, LayerType::kFullAttention);
  const DFlashParamLayout l = MakeDFlashParamLayout(c);
  EXPECT_EQ(l.specs.size(), 81u);
  const auto m = ByName(l);
  const int64_t conv_rows = 2 * 2 * (64 / 4);
  for (int i = 0; i < 5; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const char* conv : {"attention_conv", "mlp_conv"}) {
      const DFlashParamSpec& base = m.at(p + conv + ".base_kernel");
      EXPECT_EQ(base.shape, (std::vector<int64_t>{2, 2, 64}));
      EXPECT_TRUE(base.is_norm);  // no weight decay
      const DFlashParamSpec& proj = m.at(p + conv + ".kernel_projection.weight");
      EXPECT_EQ(proj.shape, (std::vector<int64_t>{conv_rows, 64}));
      EXPECT_FALSE(proj.is_norm);
      EXPECT_LT(proj.offset, l.matrix_count);
    }
  }
  EXPECT_EQ(m.at("candidate_selector.hidden_projection.weight").shape,
            (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(m.at("candidate_selector.predecessor_codebook").shape,
            (std::vector<int64_t>{97, 8}));
  EXPECT_EQ(m.at("candidate_selector.successor_codebook").shape, (std::vector<int64_t>{97, 8}));
  for (const char* n : {"candidate_selector.hidden_projection.weight",
                        "candidate_selector.predecessor_codebook",
                        "candidate_selector.successor_codebook"})
    EXPECT_LT(m.at(n).offset + m.at(n).numel(), l.matrix_count + 1) << n;
  // The update ranges still tile the buffer once, weight decay exactly on the matrices.
  std::vector<DFlashUpdateRange> r = DFlashUpdateRanges(l, 5);
  std::sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
  int64_t at = 0;
  for (const DFlashUpdateRange& u : r) {
    EXPECT_EQ(u.lo, at);
    EXPECT_EQ(u.weight_decay, u.hi <= l.matrix_count);
    at = u.hi;
  }
  EXPECT_EQ(at, l.total);
  // A DFlash config's layout is unchanged: no DFlash2 name.
  for (const DFlashParamSpec& s : MakeDFlashParamLayout(testing::TinyDFlashConfig()).specs)
    EXPECT_EQ(s.name.find("conv"), std::string::npos) << s.name;
}

// The config of a released DFlash2 drafter (z-lab's, for a 52-layer target: 5 sliding
// layers, hidden 6656, is_causal false) and its checkpoint's tensors, as its safetensors
// header lists them: the config parses, and the layout has exactly those names and shapes.
TEST(DFlash2ParamsTest, ReleasedDrafterConfigAndHeader) {
  const char* config = R"({
    "architectures": ["DFlash2DraftModel"], "model_type": "qwen3", "is_causal": false,
    "dflash_config": {"block_size": 16, "conv_group_size": 16, "conv_kernel_size": 2,
                      "final_logit_softcapping": 20.0, "mask_token_id": 201818,
                      "output_multiplier": 0.19611613513818404, "selector_rank": 256,
                      "selector_top_k": 16, "target_layer_ids": [1, 13, 25, 37, 49]},
    "attention_bias": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 6656,
    "intermediate_size": 19968, "num_attention_heads": 32, "num_hidden_layers": 5,
    "num_key_value_heads": 8, "num_target_layers": 52, "rms_norm_eps": 1e-05,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                    "sliding_attention", "sliding_attention"],
    "max_position_embeddings": 131072, "rope_parameters": {"rope_theta": 500000.0,
    "rope_type": "default"}, "sliding_window": 2048, "use_sliding_window": true,
    "tie_word_embeddings": false, "vocab_size": 202048})";
  Result<DFlashConfig> c = ParseDFlashConfigText(config, "released config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->dflash2.has_value());
  EXPECT_EQ(c->dflash2->conv_groups(6656), 416);
  EXPECT_EQ(c->dflash2->final_logit_softcapping, 20.0);
  EXPECT_EQ(c->is_causal, std::optional<bool>(false));
  const auto m = ByName(MakeDFlashParamLayout(*c));
  // The header's 81 tensors: per layer 15, then the selector's 3, fc, hidden_norm, norm.
  std::map<std::string, std::vector<int64_t>> header = {
      {"candidate_selector.hidden_projection.weight", {256, 6656}},
      {"candidate_selector.predecessor_codebook", {202048, 256}},
      {"candidate_selector.successor_codebook", {202048, 256}},
      {"fc.weight", {6656, 33280}},
      {"hidden_norm.weight", {6656}},
      {"norm.weight", {6656}}};
  for (int i = 0; i < 5; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const char* conv : {"attention_conv", "mlp_conv"}) {
      header[p + conv + ".base_kernel"] = {2, 2, 6656};
      header[p + conv + ".kernel_projection.weight"] = {1664, 6656};
    }
    header[p + "input_layernorm.weight"] = {6656};
    header[p + "post_attention_layernorm.weight"] = {6656};
    header[p + "mlp.down_proj.weight"] = {6656, 19968};
    header[p + "mlp.gate_proj.weight"] = {19968, 6656};
    header[p + "mlp.up_proj.weight"] = {19968, 6656};
    header[p + "self_attn.k_norm.weight"] = {128};
    header[p + "self_attn.q_norm.weight"] = {128};
    header[p + "self_attn.k_proj.weight"] = {1024, 6656};
    header[p + "self_attn.v_proj.weight"] = {1024, 6656};
    header[p + "self_attn.q_proj.weight"] = {4096, 6656};
    header[p + "self_attn.o_proj.weight"] = {6656, 4096};
  }
  ASSERT_EQ(header.size(), 81u);
  EXPECT_EQ(m.size(), header.size());
  for (const auto& [name, shape] : header) {
    auto it = m.find(name);
    ASSERT_NE(it, m.end()) << name << " is in the released header but not in the layout";
    EXPECT_EQ(it->second.shape, shape) << name;
  }
}

TEST(DFlash2ParamsTest, InitStartsAsDFlashWithANoOpSelector) {
  const DFlashConfig c = testing::TinyDFlash2Config();
  Result<DFlashParams> p = DFlashParams::Create(c, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->InitFromScratch(5, nullptr).ok());
  const float* w = p->master.view().data_as<float>();
  for (const DFlashParamSpec& s : p->layout.specs) {
    const float* v = w + s.offset;
    const int64_t n = s.numel();
    if (s.name.ends_with("base_kernel")) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t tap = (i / 64) % 2;
        ASSERT_EQ(v[i], tap == 0 ? 1.0f : 0.0f) << s.name << " " << i;
      }
    } else if (s.name.ends_with("kernel_projection.weight") ||
               s.name == "candidate_selector.successor_codebook") {
      EXPECT_TRUE(std::all_of(v, v + n, [](float x) { return x == 0.0f; })) << s.name;
    } else if (!s.is_norm) {
      double sq = 0;
      for (int64_t i = 0; i < n; ++i) sq += double(v[i]) * v[i];
      EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.006) << s.name;
    }
  }
  // The views: per layer and the selector.
  EXPECT_EQ(p->w.layers[1].attn_conv_base.dim(0), 2);
  EXPECT_EQ(p->w.layers[1].mlp_conv_proj.dim(0), 2 * 2 * 16);
  EXPECT_EQ(p->w.sel_pred.dim(0), 97);
  EXPECT_EQ(p->g.sel_succ.dim(1), 8);
}

class DFlash2CheckpointTest : public ::testing::Test {
 protected:
  std::unique_ptr<DFlashDrafter> NewDrafter() {
    DFlashDrafterOptions o;
    o.max_tokens = 32;
    o.num_blocks = 2;
    o.selector_loss_weight = 0.0f;  // checkpoints do not depend on it
    auto d = DFlashDrafter::Create(testing::TinyDFlash2Config(), o, kernels::HostAllocator(),
                                   nullptr);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(*d) : nullptr;
  }
  std::string dir_ = ::testing::TempDir() + "/dflash2_ckpt";
};

TEST_F(DFlash2CheckpointTest, RoundTripWithZLabNames) {
  std::unique_ptr<DFlashDrafter> a = NewDrafter(), b = NewDrafter();
  ASSERT_TRUE(a && b);
  testing::RandomizeParams(a->params(), 3);
  ASSERT_TRUE(SaveDFlashCheckpoint(dir_, *a, {7, 9}).ok());
  Result<SafetensorsReader> r = SafetensorsReader::Open(dir_ + "/model.safetensors");
  ASSERT_TRUE(r.ok());
  for (const char* n : {"layers.0.attention_conv.base_kernel",
                        "layers.1.mlp_conv.kernel_projection.weight",
                        "candidate_selector.predecessor_codebook",
                        "candidate_selector.successor_codebook",
                        "candidate_selector.hidden_projection.weight"})
    EXPECT_TRUE(r->Get(n).ok()) << n;
  Result<DFlashConfig> saved = LoadDFlashConfig(dir_);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->dflash2, testing::TinyDFlash2Config().dflash2);
  DFlashTrainerState st;
  ASSERT_TRUE(LoadDFlashCheckpoint(dir_, *b, &st).ok());
  const DFlashParams &pa = a->params(), &pb = b->params();
  EXPECT_EQ(std::memcmp(pa.master.data(), pb.master.data(), pa.layout.total * 4), 0);
  EXPECT_EQ(std::memcmp(pa.compute.data(), pb.compute.data(), pa.layout.total * 2), 0);
}

TEST_F(DFlash2CheckpointTest, ShapeMismatchNamesTheTensor) {
  std::unique_ptr<DFlashDrafter> a = NewDrafter();
  ASSERT_TRUE(a);
  testing::RandomizeParams(a->params(), 3);
  ASSERT_TRUE(SaveDFlashCheckpoint(dir_ + "_bad", *a, {1, 1}).ok());
  // A drafter of another selector rank reads the same file: refused naming the tensor.
  DFlashConfig other = testing::TinyDFlash2Config();
  other.dflash2->selector_rank = 4;
  DFlashDrafterOptions o;
  o.max_tokens = 32;
  o.num_blocks = 2;
  o.selector_loss_weight = 0.0f;
  auto b = DFlashDrafter::Create(other, o, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(b.ok());
  Status st = LoadDFlashWeights(dir_ + "_bad", **b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("candidate_selector.hidden_projection.weight"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("does not match the drafter's [4, 64]"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tandem::models
