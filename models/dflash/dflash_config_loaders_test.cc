// A drafter config.json as tandem writes it, read rule by rule the way the two serving
// engines read it: SGLang's parse_dflash_draft_config and the DFlash model around it, and
// vLLM's EAGLEConfig (method "dflash") and the Qwen3 DFlash model. Each rule names its
// source file and function; the rules were read from the engines' code and are restated
// here in C++ over the JSON (no Python, no copy of their code). A rule that fails means a
// server would refuse the checkpoint, or load it and serve something other than what was
// trained.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_drafter_internal.h"
#include "models/dflash/dflash_params.h"
#include "models/io/hf_config.h"
#include "models/io/model_test_util.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// A Qwen3-8B-shaped target.
constexpr const char* kTarget = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
  "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
  "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
  "tie_word_embeddings": false, "hidden_act": "silu", "torch_dtype": "bfloat16"
})";

// The drafter config the drafter actor builds (actors/dflash/drafter_actor.cc,
// DrafterConfig): the target's layer config with the drafter's depth and attention pattern
// (4 sliding layers of window 2048, then a full one), block 16, the default context layers.
DFlashConfig DrafterLikeTheActor(const TransformerConfig& target) {
  DFlashConfig c;
  c.layers = target;
  c.layers.architectures = {"DFlashDraftModel"};
  c.layers.num_hidden_layers = 5;
  c.layers.layer_types = {LayerType::kSlidingAttention, LayerType::kSlidingAttention,
                          LayerType::kSlidingAttention, LayerType::kSlidingAttention,
                          LayerType::kFullAttention};
  c.layers.sliding_window = 2048;
  c.layers.tie_word_embeddings = false;
  c.layers.rotary_dim = c.layers.head_dim;
  c.mask_token_id = 151669;
  c.block_size = 16;
  c.num_target_layers = target.num_hidden_layers;
  c.target_layer_ids = DFlashTargetLayerIds(target.num_hidden_layers, 5);
  return c;
}

class DFlashConfigLoadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = ParseTransformerConfigText(kTarget, "target/config.json");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = *t;
    drafter_ = DrafterLikeTheActor(target_);
    ASSERT_TRUE(WriteDFlashConfig(dir_.File("config.json"), drafter_).ok());
    j_ = json::parse(testing::ReadRaw(dir_.File("config.json")));
    ASSERT_TRUE(j_.contains("dflash_config") && j_["dflash_config"].is_object());
    dc_ = j_["dflash_config"];
  }
  // dict.get(key, top-level value): the lookup both engines use for dflash_config fields.
  json Nested(const char* key) const {
    return dc_.contains(key) ? dc_[key] : j_.value(key, json());
  }
  static bool IsInt(const json& v) { return v.is_number_integer(); }  // JSON true is not one
  std::vector<int64_t> TargetLayerIds() const {
    return Nested("target_layer_ids").get<std::vector<int64_t>>();
  }
  // The input width of the checkpoint's fc.weight [H, k*H] (0 when absent).
  int64_t FcWidth() const {
    for (const DFlashParamSpec& s : MakeDFlashParamLayout(drafter_).specs)
      if (s.name == "fc.weight") return s.shape.at(1);
    return 0;
  }

  TransformerConfig target_;
  DFlashConfig drafter_;
  testing::ScratchDir dir_;
  json j_, dc_;
};

// ---- SGLang: python/sglang/srt/speculative/dflash_utils.py, parse_dflash_draft_config ----

TEST_F(DFlashConfigLoadersTest, SGLangParseDflashDraftConfig) {
  // _get_text_config: no text_config, so the config itself; num_hidden_layers an int >= 1.
  ASSERT_FALSE(j_.contains("text_config"));
  ASSERT_TRUE(IsInt(j_["num_hidden_layers"]));
  EXPECT_GE(j_["num_hidden_layers"].get<int64_t>(), 1);
  // num_target_layers: dflash_config first, then top level; an int >= 1 when present.
  ASSERT_TRUE(IsInt(Nested("num_target_layers")));
  EXPECT_EQ(Nested("num_target_layers").get<int64_t>(), target_.num_hidden_layers);
  // block_size: dflash_config first ("newer checkpoints"), then top level; an int >= 1.
  // Written in both places, equal, so older readers (top level only) agree.
  ASSERT_TRUE(dc_.contains("block_size") && IsInt(dc_["block_size"]));
  ASSERT_TRUE(j_.contains("block_size") && IsInt(j_["block_size"]));
  EXPECT_EQ(dc_["block_size"], j_["block_size"]);
  EXPECT_EQ(Nested("block_size").get<int64_t>(), drafter_.block_size);
  // conv_kernel_size / conv_group_size and selector_rank / selector_top_k: both or neither.
  for (auto [a, b] : {std::pair{"conv_kernel_size", "conv_group_size"},
                      std::pair{"selector_rank", "selector_top_k"}})
    EXPECT_EQ(dc_.value(a, 0) != 0, dc_.value(b, 0) != 0) << a << " / " << b;
  // target_layer_ids: a non-empty list of ints (dflash_config first, then top level) ...
  const json ids = Nested("target_layer_ids");
  ASSERT_TRUE(ids.is_array() && !ids.empty());
  for (const json& v : ids) ASSERT_TRUE(IsInt(v));
  // ... and DFlashDraftConfig.resolve_target_layer_ids: each in [0, target_num_layers).
  for (int64_t id : TargetLayerIds()) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, target_.num_hidden_layers);
  }
  EXPECT_EQ(TargetLayerIds(), drafter_.target_layer_ids);
  // mask_token_id: an int (not a bool), >= 0; and a token the target's vocabulary has.
  ASSERT_TRUE(IsInt(Nested("mask_token_id")));
  EXPECT_GE(Nested("mask_token_id").get<int64_t>(), 0);
  EXPECT_LT(Nested("mask_token_id").get<int64_t>(), target_.vocab_size);
}

// SGLang's layer attention: python/sglang/srt/models/dflash.py,
// _get_dflash_layer_attention_params, with dflash_utils.py get_dflash_layer_types and
// get_dflash_attention_sliding_window_size.
TEST_F(DFlashConfigLoadersTest, SGLangLayerAttentionIsTheTrainedMask) {
  // layer_types: a list of strings, one per draft layer, each full or sliding.
  const json& lt = j_["layer_types"];
  ASSERT_TRUE(lt.is_array());
  ASSERT_EQ(static_cast<int64_t>(lt.size()), j_["num_hidden_layers"].get<int64_t>());
  for (size_t l = 0; l < lt.size(); ++l) {
    const std::string type = lt[l].get<std::string>();
    ASSERT_TRUE(type == "full_attention" || type == "sliding_attention") << type;
    // full -> ENCODER_ONLY (bidirectional, no window); sliding -> DECODER (causal) with
    // window_left = sliding_window - 1. tandem trains layer l with DFlashLayerAttention:
    // the same causality, and the kernels' per-slot bound is window - 1 (attention.h).
    const kernels::DFlashAttentionConfig trained = DFlashLayerAttention(drafter_, l);
    if (type == "full_attention") {
      EXPECT_FALSE(trained.causal_in_block) << "layer " << l;
      EXPECT_EQ(trained.window, 0) << "layer " << l;
    } else {
      ASSERT_TRUE(IsInt(j_["sliding_window"])) << "sliding layers require sliding_window";
      const int64_t window_left = j_["sliding_window"].get<int64_t>() - 1;
      EXPECT_TRUE(trained.causal_in_block) << "layer " << l;
      EXPECT_EQ(trained.window - 1, window_left) << "layer " << l;
    }
  }
}

// SGLang's DFlashDraftModel.__init__ (python/sglang/srt/models/dflash.py): fc takes
// len(target_layer_ids) * hidden_size features; the checkpoint's fc.weight must have them.
TEST_F(DFlashConfigLoadersTest, SGLangFcWidth) {
  const int64_t h = j_["hidden_size"].get<int64_t>();
  EXPECT_EQ(FcWidth(), static_cast<int64_t>(TargetLayerIds().size()) * h);
}

// SGLang's ModelConfig._derive_context_length (python/sglang/srt/configs/model_config.py):
// the draft's ModelConfig gets the target's context length and refuses it when it exceeds
// the draft's own (from max_position_embeddings) unless
// SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set. The drafter keeps the target's.
TEST_F(DFlashConfigLoadersTest, SGLangContextLengthIsTheTargets) {
  EXPECT_EQ(j_["max_position_embeddings"].get<int64_t>(), target_.max_position_embeddings);
  EXPECT_EQ(j_["vocab_size"].get<int64_t>(), target_.vocab_size);
}

// ---- vLLM: vllm/config/speculative.py SpeculativeConfig.__post_init__ wraps the draft's
// hf_config in vllm/transformers_utils/configs/eagle.py EAGLEConfig(method="dflash") ----

TEST_F(DFlashConfigLoadersTest, VllmEagleConfig) {
  // AutoConfig.for_model(**config): model_type must be one transformers knows.
  EXPECT_EQ(j_["model_type"], "qwen3");
  // architectures: kept when they start or end with "DFlash", else "DFlash" + arch; the
  // registry maps DFlashDraftModel to the Qwen3 DFlash model.
  ASSERT_EQ(j_["architectures"], json::array({"DFlashDraftModel"}));
  // truncated_vocab_size = the model's vocab_size: the draft reuses the target's embedding
  // and LM head, so it must be the target's.
  EXPECT_EQ(j_["vocab_size"].get<int64_t>(), target_.vocab_size);
  // _normalize_dflash_layer_ids: a top-level target_layer_ids, when present, equals the
  // nested one; eagle_aux_hidden_state_layer_ids, when present, is target_layer_ids + 1
  // (else ValueError).
  if (j_.contains("target_layer_ids")) {
    EXPECT_EQ(j_["target_layer_ids"], dc_["target_layer_ids"]);
  }
  ASSERT_TRUE(j_.contains("eagle_aux_hidden_state_layer_ids"));
  std::vector<int64_t> want;
  for (int64_t id : TargetLayerIds()) want.push_back(id + 1);
  EXPECT_EQ(j_["eagle_aux_hidden_state_layer_ids"].get<std::vector<int64_t>>(), want);
}

// vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py, get_eagle3_aux_layers_from_config:
// eagle_aux_hidden_state_layer_ids first, else dflash_config.target_layer_ids + 1 (vLLM
// captures the hidden state entering a layer; DFlash names the layer it leaves). Versions
// that read only the first key capture the right layers only if it is written. Then
// vllm/model_executor/models/qwen3_dflash.py, _get_dflash_fc_input_size:
// (target_hidden_size or hidden_size) * len(aux layers) = fc's input width.
TEST_F(DFlashConfigLoadersTest, VllmAuxLayers) {
  const auto aux = j_["eagle_aux_hidden_state_layer_ids"].get<std::vector<int64_t>>();
  EXPECT_EQ(aux, (std::vector<int64_t>{2, 10, 18, 26, 34}));  // outputs of 1, 9, 17, 25, 33
  std::vector<int64_t> fallback;
  for (int64_t id : dc_["target_layer_ids"].get<std::vector<int64_t>>()) fallback.push_back(id + 1);
  EXPECT_EQ(aux, fallback);
  for (int64_t id : aux) EXPECT_LE(id, target_.num_hidden_layers);
  const int64_t hidden = j_.value("target_hidden_size", j_["hidden_size"].get<int64_t>());
  EXPECT_EQ(hidden * static_cast<int64_t>(aux.size()), FcWidth());
}

// vllm/model_executor/models/qwen3_dflash.py, _resolve_layer_attention and
// _dflash_layer_causal: with layer_types and no dflash_config.use_swa, layer l is sliding iff
// layer_types[l] is; its window is dflash_config.swa_window_size or sliding_window; causal is
// is_causal, else dflash_config.causal, else "layer l is sliding". vLLM's window, like HF's,
// counts the query itself: the same W the kernels train with.
TEST_F(DFlashConfigLoadersTest, VllmLayerAttentionIsTheTrainedMask) {
  EXPECT_FALSE(dc_.value("use_swa", false));
  EXPECT_FALSE(j_.contains("is_causal"));
  EXPECT_FALSE(dc_.contains("causal"));
  const json window =
      dc_.contains("swa_window_size") ? dc_["swa_window_size"] : j_["sliding_window"];
  for (int l = 0; l < drafter_.layers.num_hidden_layers; ++l) {
    const bool sliding = j_["layer_types"][l] == "sliding_attention";
    const kernels::DFlashAttentionConfig trained = DFlashLayerAttention(drafter_, l);
    EXPECT_EQ(trained.causal_in_block, sliding) << "layer " << l;
    if (sliding) {
      ASSERT_TRUE(IsInt(window));
      EXPECT_EQ(trained.window, window.get<int64_t>()) << "layer " << l;
    }
  }
}

// A drafter trained with is_causal set: the export carries it, and vLLM's rule (is_causal
// before anything else) and z-lab's loader (is_causal for every layer) then give each layer
// the causality it was trained with; the window stays per layer.
TEST_F(DFlashConfigLoadersTest, IsCausalIsWrittenAndIsTheTrainedMask) {
  for (bool value : {false, true}) {
    SCOPED_TRACE(value);
    DFlashConfig c = drafter_;
    c.is_causal = value;
    ASSERT_TRUE(WriteDFlashConfig(dir_.File("config.json"), c).ok());
    const json j = json::parse(testing::ReadRaw(dir_.File("config.json")));
    ASSERT_TRUE(j.contains("is_causal") && j["is_causal"].is_boolean());
    for (int l = 0; l < c.layers.num_hidden_layers; ++l) {
      const bool sliding = j["layer_types"][l] == "sliding_attention";
      const kernels::DFlashAttentionConfig trained = DFlashLayerAttention(c, l);
      EXPECT_EQ(trained.causal_in_block, j["is_causal"].get<bool>()) << "layer " << l;
      EXPECT_EQ(trained.window, sliding ? j["sliding_window"].get<int64_t>() : 0)
          << "layer " << l;
    }
  }
}

// Reading back: tandem refuses what vLLM refuses (aux ids that are not target ids + 1) and
// accepts its own output, aux ids included.
TEST_F(DFlashConfigLoadersTest, ReadBackChecksAuxLayerIds) {
  auto back = ParseDFlashConfig(j_, "d/config.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->target_layer_ids, drafter_.target_layer_ids);
  json bad = j_;
  bad["eagle_aux_hidden_state_layer_ids"] = drafter_.target_layer_ids;  // forgot the + 1
  auto r = ParseDFlashConfig(bad, "d/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("eagle_aux_hidden_state_layer_ids"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("d/config.json"), std::string::npos);
}

}  // namespace
}  // namespace tandem::models
