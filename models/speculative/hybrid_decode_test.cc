// DFlash speculative decoding over the Qwen3.5 hybrid target on the CPU: greedy decoding is
// lossless (every block size gives exactly the tokens of plain greedy decoding, which
// recomputes the whole sequence from an empty cache for each token, so no state is carried
// or rolled back), the accepted-length sequence is recorded and consistent, and `tandem
// eval`'s library call runs end to end on the committed tiny hybrid checkpoint, picking the
// family from its config.json.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "models/dflash/dflash_checkpoint.h"
#include "models/io/model_test_util.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/speculative/dflash_decoder.h"
#include "models/speculative/moe_decode_test_util.h"
#include "models/speculative/spec_eval_run.h"

namespace tandem::models {
namespace {

using kernels::Device;
using kernels::DType;
using kernels::TensorView;

const std::string kTinyHybrid = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_5_tiny";

// A 2-layer DFlash drafter over target layers {1, 3, 6} of hybrid `t`.
DFlashConfig DrafterFor(const Qwen35Config& t) {
  DecodeTargetShape shape;
  shape.vocab_size = t.vocab_size;
  shape.hidden_size = t.hidden_size;
  shape.num_hidden_layers = t.num_hidden_layers;
  return testing::TinyDrafterForShape(shape, {1, 3, 6});
}

class HybridDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadQwen35Config(kTinyHybrid);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    // A vocabulary of 6 so that a random drafter's guesses are sometimes right: with these
    // seeds blocks are accepted whole, in part (a replay of several tokens) and not at all
    // (a replay of one token, the last accepted one).
    cfg_ = *config;
    cfg_.vocab_size = 6;
    auto w = Qwen35Weights::Random(cfg_, kernels::HostAllocator(), 21, nullptr);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    auto t = Qwen35Target::Create(std::move(w).value(), {.max_tokens = 128});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(*t);
    auto d = DFlashDrafter::Create(DrafterFor(cfg_), {.max_tokens = 128, .num_blocks = 1},
                                   kernels::HostAllocator(), nullptr);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    drafter_ = std::move(*d);
    testing::RandomizeDrafter(*drafter_, 5);
  }

  // Plain greedy decoding without carried state: for every new token, a fresh cache
  // prefills the whole sequence and the argmax (lowest id on ties) of its last row is taken.
  std::vector<int32_t> PlainGreedy(std::vector<int32_t> seq, int n) {
    const int64_t v = cfg_.vocab_size;
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      auto cache = Qwen35Cache::Create(cfg_, static_cast<int64_t>(seq.size()), 1,
                                       kernels::HostAllocator());
      EXPECT_TRUE(cache.ok());
      const int64_t t = static_cast<int64_t>(seq.size());
      std::vector<float> logits(t * v);
      const Status st =
          target_->Extend(*cache, seq, {}, TensorView(logits.data(), DType::kF32, {t, v}));
      EXPECT_TRUE(st.ok()) << st.ToString();
      const float* row = logits.data() + (t - 1) * v;
      const int32_t tok = static_cast<int32_t>(std::max_element(row, row + v) - row);
      out.push_back(tok);
      seq.push_back(tok);
    }
    return out;
  }

  Qwen35Config cfg_;
  std::unique_ptr<Qwen35Target> target_;
  std::unique_ptr<DFlashDrafter> drafter_;
};

TEST_F(HybridDecodeTest, GreedySpeculativeDecodingIsLossless) {
  const std::vector<int32_t> prompt = {3, 1, 1, 4, 4, 4, 3, 2, 0};
  constexpr int kNew = 48;
  const std::vector<int32_t> plain = PlainGreedy(prompt, kNew);
  auto decoder = DFlashDecoder::Create(target_.get(), drafter_.get(), 128);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  SpecDecodeOptions o;
  o.max_new_tokens = kNew;
  bool partial = false, full = false;  // some step accepted a proper part / all of its drafts
  for (int64_t b : {1, 2, 5, 16}) {
    o.block_size = b;
    auto r = (*decoder)->Generate(prompt, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tokens, plain) << "block size " << b;
    // The accepted-length sequence: one entry per verify step, each in [1, b], committing
    // exactly the generated tokens after the prefill's pick (the last step may be cut).
    const int64_t committed =
        1 + std::accumulate(r->accept_lengths.begin(), r->accept_lengths.end(), int64_t{0});
    EXPECT_GE(committed, kNew);
    EXPECT_LT(committed - r->accept_lengths.back(), kNew);
    for (int32_t len : r->accept_lengths) {
      EXPECT_GE(len, 1);
      EXPECT_LE(len, b);
      partial |= len > 1 && len < b;
      full |= b > 1 && len == b;
    }
    if (b == 1) {
      EXPECT_EQ(r->accept_lengths, std::vector<int32_t>(kNew - 1, 1));
    }
    fmt::print("block {} accept lengths: {}\n", b, fmt::join(r->accept_lengths, " "));
  }
  // Accepted in part: the DeltaNet replay of several tokens ran; all accepted: no replay.
  EXPECT_TRUE(partial) << "no block was accepted in part: the multi-token replay went untested";
  EXPECT_TRUE(full) << "no block was accepted whole";
}

// Above temperature 0, speculative sampling (the host-side rule of spec_pick.h, the same for
// both families): seeded, in the vocabulary, and repeatable (so Reset really empties the cache).
TEST_F(HybridDecodeTest, SampledDecodingIsSeeded) {
  auto decoder = DFlashDecoder::Create(target_.get(), drafter_.get(), 128);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  SpecDecodeOptions o;
  o.max_new_tokens = 24;
  o.block_size = 5;
  o.temperature = 1.0f;
  o.seed = 3;
  const std::vector<int32_t> prompt = {3, 1, 1, 4};
  auto a = (*decoder)->Generate(prompt, o);
  auto b = (*decoder)->Generate(prompt, o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->accept_lengths, b->accept_lengths);
  EXPECT_EQ(a->tokens.size(), 24u);
  for (int32_t t : a->tokens) EXPECT_LT(t, cfg_.vocab_size);
}

TEST_F(HybridDecodeTest, DecoderRefusesATargetThatCannotRollBackItsBlock) {
  auto small = MakeDecodeTarget(target_.get(), 128, /*max_rollback=*/4, nullptr);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  const Status s = DFlashDecoder::Create(std::move(*small), drafter_.get(), 128).status();
  EXPECT_NE(s.ToString().find("blocks of up to 4 tokens, below the drafter's block size 16"),
            std::string::npos)
      << s.ToString();
}

TEST(DecodeTargetShape, FamilyComesFromModelType) {
  auto hybrid = ReadDecodeTargetShape(kTinyHybrid);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString();
  EXPECT_EQ(hybrid->model_type, "qwen3_5");
  EXPECT_EQ(hybrid->hidden_size, 64);
  EXPECT_EQ(hybrid->num_hidden_layers, 8);
  EXPECT_EQ(hybrid->eos_token_ids, std::vector<int64_t>{2});
  auto dense = ReadDecodeTargetShape(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_tiny");
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  EXPECT_EQ(dense->model_type, "qwen3");
  EXPECT_EQ(ReadDecodeTargetShape("/nonexistent/model").status().code(), StatusCode::kNotFound);
  const testing::ScratchDir scratch;  // unique per process: see the CMakeLists' shared-TMPDIR run
  const std::string dir = scratch.path();
  std::ofstream(dir + "/config.json") << R"({"model_type": "qwen3_next", "hidden_size": 8})";
  const Status s = ReadDecodeTargetShape(dir).status();
  EXPECT_NE(s.ToString().find("key 'model_type': 'qwen3_next' is not a target tandem decodes"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("qwen3_moe"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("qwen3_5_moe_text"), std::string::npos) << s.ToString();
  std::ofstream(dir + "/config.json") << R"({"hidden_size": 8})";
  EXPECT_NE(ReadDecodeTargetShape(dir).status().ToString().find("key 'model_type': missing"),
            std::string::npos);
}

TEST(HybridEval, RunsEndToEndOnTheTinyHybridCheckpoint) {
  auto config = LoadQwen35Config(kTinyHybrid);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const testing::ScratchDir scratch;
  const std::string dir = scratch.path();
  auto drafter = DFlashDrafter::Create(DrafterFor(*config), {.max_tokens = 64, .num_blocks = 1},
                                       kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(drafter.ok()) << drafter.status().ToString();
  testing::RandomizeDrafter(**drafter, 7);
  ASSERT_TRUE(SaveDFlashCheckpoint(dir + "/drafter", **drafter, {0, 7}).ok());
  {
    std::ofstream f(dir + "/prompts.jsonl");
    f << "{\"input_ids\": [5, 17, 300, 42, 8]}\n{\"input_ids\": [1, 2, 3]}\nnot json\n";
  }
  SpecEvalRequest q;
  q.target_dir = kTinyHybrid;
  q.drafter_dir = dir + "/drafter";
  q.prompts_file = dir + "/prompts.jsonl";
  q.skip_bad = true;  // the malformed third line is skipped and counted
  q.max_new_tokens = 12;
  q.stop_token_ids = {511};  // not the checkpoint's eos (2), so every prompt runs 12 tokens
  auto r = RunSpecEval(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompts_skipped, 1);
  EXPECT_EQ(r->run.generated_tokens, 24);
  EXPECT_GE(r->run.tau, 1.0);
  EXPECT_LE(r->run.tau, 16.0);
  EXPECT_EQ(r->baseline.prompts, 2);
  EXPECT_EQ(r->baseline.tau, 1.0);
  EXPECT_NE(FormatSpecEvalReport(*r).find("tau"), std::string::npos);

  // Batched decoding drives dense targets only: the hybrid is refused, naming the family.
  SpecEvalRequest batched = q;
  batched.batch = 2;
  const Status b = RunSpecEval(batched).status();
  EXPECT_NE(b.ToString().find("is the Qwen3.5 / 3.6 hybrid (model_type qwen3_5)"),
            std::string::npos)
      << b.ToString();

  // A drafter built for another depth is refused before any weights are read, naming both.
  DFlashConfig other = DrafterFor(*config);
  other.num_target_layers = 12;
  other.target_layer_ids = {1, 3, 10};
  ASSERT_TRUE(WriteDFlashConfig(dir + "/drafter/config.json", other).ok());
  const Status s = RunSpecEval(q).status();
  EXPECT_NE(s.ToString().find("num_target_layers 12 does not match the target's "
                              "num_hidden_layers 8"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace tandem::models
