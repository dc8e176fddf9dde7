// DFlash checkpoints and the trainer on the CPU: bitwise save/load round trip, exact resume
// (6 steps == 3 + save + load + 3, bit for bit), HF key names, clear errors for bad files.
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_trainer.h"
#include "models/dflash/dflash_test_util.h"
#include "models/io/model_test_util.h"
#include "models/io/safetensors.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

class TrainerHarness {
 public:
  TrainerHarness() : config_(testing::TinyDFlashConfig()) {
    const int64_t v = config_.layers.vocab_size, h = config_.layers.hidden_size;
    batch_ = testing::MakeBatch({30, 18}, v, 4);
    embedding_ = testing::RandomBf16(v * h, 1.0f, 1);
    lm_head_ = testing::RandomBf16(v * h, 0.3f, 2);
    for (int i = 0; i < 2; ++i) context_.push_back(testing::RandomBf16(48 * h, 1.0f, 3 + i));
  }
  std::unique_ptr<DFlashTrainer> NewTrainer() {
    DFlashTrainOptions o;
    o.max_tokens = 64;
    o.anchors_per_batch = 4;
    o.total_steps = 10;
    o.warmup_ratio = 0.2;
    o.lr = 1e-3f;
    o.noise_std = 0.05f;
    o.seed = 17;
    o.ce_chunk_rows = 16;
    auto t = DFlashTrainer::Create(config_, o, kernels::HostAllocator(), nullptr);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }
  Status Step(DFlashTrainer& t) {
    const int64_t v = config_.layers.vocab_size, h = config_.layers.hidden_size;
    DFlashTargetHead head{TensorView(embedding_.data(), DType::kBF16, Shape{v, h}),
                          TensorView(lm_head_.data(), DType::kBF16, Shape{v, h})};
    std::vector<TensorView> ctx;
    for (auto& c : context_) ctx.emplace_back(c.data(), DType::kBF16, Shape{48, h});
    return t.Step(head, batch_.meta(), ctx);
  }
  const DFlashConfig& config() const { return config_; }

 private:
  DFlashConfig config_;
  testing::HostBatch batch_;
  std::vector<bf16> embedding_, lm_head_;
  std::vector<std::vector<bf16>> context_;
};

bool SameBytes(const TensorView& a, const TensorView& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

void ExpectSameState(DFlashParams& a, DFlashParams& b) {
  EXPECT_TRUE(SameBytes(a.master, b.master));
  EXPECT_TRUE(SameBytes(a.compute, b.compute));
  EXPECT_TRUE(SameBytes(a.adam_m, b.adam_m));
  EXPECT_TRUE(SameBytes(a.adam_v, b.adam_v));
  EXPECT_TRUE(SameBytes(a.step, b.step));
}

TEST(DFlashCheckpointTest, SaveLoadRoundTripIsBitwise) {
  testing::ScratchDir dir;
  TrainerHarness h;
  auto a = h.NewTrainer();
  ASSERT_TRUE(a->drafter().params().InitFromScratch(5, nullptr).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(h.Step(*a).ok());
  ASSERT_TRUE(SaveDFlashCheckpoint(dir.path(), a->drafter(), a->state()).ok());
  auto b = h.NewTrainer();
  DFlashTrainerState st;
  Status s = LoadDFlashCheckpoint(dir.path(), b->drafter(), &st);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(st.step, 2);
  EXPECT_EQ(st.seed, 17u);
  ExpectSameState(a->drafter().params(), b->drafter().params());

  // HF layout: the key names of docs/architecture.md, bf16, and a config that parses back.
  auto r = SafetensorsReader::Open(dir.File("model.safetensors"));
  ASSERT_TRUE(r.ok());
  for (const char* key : {"layers.0.self_attn.q_proj.weight", "layers.1.self_attn.k_norm.weight",
                          "layers.1.mlp.up_proj.weight", "layers.0.post_attention_layernorm.weight",
                          "fc.weight", "hidden_norm.weight", "norm.weight"}) {
    const TensorInfo* t = r->Find(key);
    ASSERT_NE(t, nullptr) << key;
    EXPECT_EQ(t->dtype, DType::kBF16);
  }
  EXPECT_EQ(r->Find("fc.weight")->shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(r->tensors().size(), 2u * 11 + 3);
  auto cfg = LoadDFlashConfig(dir.path());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->target_layer_ids, h.config().target_layer_ids);
  EXPECT_EQ(cfg->mask_token_id, 63);

  // Weights only: master is the bf16 weights widened, optimizer reset.
  auto c = h.NewTrainer();
  ASSERT_TRUE(LoadDFlashWeights(dir.path(), c->drafter()).ok());
  EXPECT_TRUE(SameBytes(a->drafter().params().compute, c->drafter().params().compute));
  EXPECT_EQ(c->drafter().params().step.view().data_as<int32_t>()[0], 0);
}

TEST(DFlashCheckpointTest, ResumeIsBitExact) {
  testing::ScratchDir dir;
  TrainerHarness h;
  auto straight = h.NewTrainer();
  auto first = h.NewTrainer();
  ASSERT_TRUE(straight->drafter().params().InitFromScratch(9, nullptr).ok());
  ASSERT_TRUE(first->drafter().params().InitFromScratch(9, nullptr).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(h.Step(*straight).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Step(*first).ok());
  ASSERT_TRUE(SaveDFlashCheckpoint(dir.path(), first->drafter(), first->state()).ok());
  auto resumed = h.NewTrainer();
  DFlashTrainerState st;
  ASSERT_TRUE(LoadDFlashCheckpoint(dir.path(), resumed->drafter(), &st).ok());
  resumed->Restore(st);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Step(*resumed).ok());
  ExpectSameState(straight->drafter().params(), resumed->drafter().params());
  EXPECT_TRUE(SameBytes(straight->drafter().loss(), resumed->drafter().loss()));
  // And the run is not trivially constant: training moved the weights.
  EXPECT_FALSE(SameBytes(straight->drafter().params().master, first->drafter().params().master));
}

TEST(DFlashCheckpointTest, BadFilesGiveClearErrors) {
  testing::ScratchDir dir;
  TrainerHarness h;
  auto a = h.NewTrainer();
  ASSERT_TRUE(a->drafter().params().InitFromScratch(5, nullptr).ok());
  auto b = h.NewTrainer();
  DFlashTrainerState st;

  Status missing = LoadDFlashCheckpoint(dir.path(), b->drafter(), &st);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("trainer_state.json"), std::string::npos);

  ASSERT_TRUE(SaveDFlashCheckpoint(dir.path(), a->drafter(), a->state()).ok());
  // Truncated weights file.
  const std::string model = testing::ReadRaw(dir.File("model.safetensors"));
  testing::WriteRaw(dir.File("model.safetensors"), model.substr(0, model.size() - 100));
  Status trunc = LoadDFlashWeights(dir.path(), b->drafter());
  EXPECT_EQ(trunc.code(), StatusCode::kDataLoss) << trunc.ToString();
  EXPECT_NE(trunc.message().find("model.safetensors"), std::string::npos);
  testing::WriteRaw(dir.File("model.safetensors"), model);

  // A checkpoint of a differently shaped drafter.
  DFlashConfig other = h.config();
  other.layers.intermediate_size = 40;
  auto c = DFlashDrafter::Create(other, {64, 4, 16}, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(c.ok());
  Status shape = LoadDFlashWeights(dir.path(), **c);
  EXPECT_EQ(shape.code(), StatusCode::kDataLoss) << shape.ToString();
  EXPECT_NE(shape.message().find("mlp.gate_proj"), std::string::npos) << shape.ToString();

  // Missing optimizer state.
  std::filesystem::remove(dir.File("optimizer.safetensors"));
  Status opt = LoadDFlashCheckpoint(dir.path(), b->drafter(), &st);
  EXPECT_EQ(opt.code(), StatusCode::kNotFound) << opt.ToString();

  // Garbage trainer state.
  testing::WriteRaw(dir.File("trainer_state.json"), "{\"step\": ");
  Status garbage = LoadDFlashCheckpoint(dir.path(), b->drafter(), &st);
  EXPECT_EQ(garbage.code(), StatusCode::kDataLoss) << garbage.ToString();
}

// A hand-edited trainer_state.json is DataLoss naming the file and the field,
// never an exception's text or a step that overflows (1e30 resumed at INT64_MIN before).
TEST(DFlashCheckpointTest, TrainerStateFieldsAreValidated) {
  const std::string good =
      R"({"format": "tandem-dflash-trainer", "version": 1, "step": 30, "seed": 7})";
  auto ok = ParseDFlashTrainerState(good, "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->step, 30);
  EXPECT_EQ(ok->seed, 7u);
  struct Case {
    std::string from, to, part;
  };
  const std::vector<Case> cases = {
      {"\"step\": 30", "\"step\": 1e30", "t.json: field 'step': expected an integer in [0, 2^31)"},
      {"\"step\": 30", "\"step\": -4", "t.json: field 'step'"},
      {"\"step\": 30", "\"step\": 4294967296", "t.json: field 'step'"},
      {"\"seed\": 7", "\"seed\": \"7\"", "t.json: field 'seed'"},
      {"\"seed\": 7", "\"sead\": 7", "t.json: field 'sead': unknown field"},
      {"\"version\": 1", "\"version\": 2", "t.json: field 'version': expected 1"},
      {", \"seed\": 7", "", "t.json: field 'seed': missing"},
      {"{", "[", "t.json: not valid JSON"},
  };
  for (const Case& c : cases) {
    std::string text = good;
    text.replace(text.find(c.from), c.from.size(), c.to);
    auto r = ParseDFlashTrainerState(text, "t.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(c.part), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace tandem::models
