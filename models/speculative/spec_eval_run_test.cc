// RunSpecEval end to end on the tiny golden pair: a batched run reports the same acceptance
// as one prompt at a time, and bad prompt files fail clearly or (skip_bad) are counted in
// the report; a DFlash2 drafter proposes with its selector, and a selector_top_k it cannot
// run is refused naming the key.
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "models/dflash/dflash_checkpoint.h"
#include "models/io/model_test_util.h"
#include "models/speculative/dflash2_proposal_test_util.h"
#include "models/speculative/spec_eval_run.h"

namespace tandem::models {
namespace {

class RunSpecEvalTest : public ::testing::Test {
 protected:
  RunSpecEvalTest() {
    const std::string golden = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/dflash_decode_tiny/";
    q_.target_dir = golden + "target";
    q_.drafter_dir = golden + "drafter";
    q_.prompts_file = golden + "prompts.jsonl";
    q_.max_new_tokens = 24;
  }
  std::string Write(const std::string& text) {
    q_.prompts_file = dir_.File("p.jsonl");
    std::ofstream(q_.prompts_file) << text;
    return q_.prompts_file;
  }
  testing::ScratchDir dir_;
  SpecEvalRequest q_;
};

// Temperature > 0 adds a run by speculative sampling next to the greedy one: seeded (the
// same seed gives the same tau and tokens, at any batch; another seed differs), and both
// runs in the JSON and the table.
TEST_F(RunSpecEvalTest, SampledRunIsSeededAndReportedNextToGreedy) {
  q_.baseline = false;
  auto greedy = RunSpecEval(q_);
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  EXPECT_EQ(greedy->sampled.prompts, 0);  // the default: temperature 0 only
  EXPECT_FALSE(SpecEvalReportToJson(*greedy).contains("sampled"));
  q_.temperature = 0.7f;
  q_.top_p = 0.95f;
  q_.top_k = 20;
  q_.seed = 5;
  auto a = RunSpecEval(q_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_DOUBLE_EQ(a->run.tau, greedy->run.tau);  // the greedy run is unchanged
  EXPECT_EQ(a->sampled.prompts, 8);
  EXPECT_GT(a->sampled.tau, 1.2);
  q_.batch = 3;
  auto b = RunSpecEval(q_);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_DOUBLE_EQ(b->sampled.tau, a->sampled.tau);
  EXPECT_EQ(b->sampled.verify_steps, a->sampled.verify_steps);
  EXPECT_EQ(b->sampled.accept_rate, a->sampled.accept_rate);
  q_.seed = 6;
  auto c = RunSpecEval(q_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(c->sampled.accept_rate, a->sampled.accept_rate);
  const nlohmann::json j = SpecEvalReportToJson(*a);
  EXPECT_EQ(j["version"], 2);
  EXPECT_DOUBLE_EQ(j["run"]["tau"].get<double>(), a->run.tau);
  EXPECT_DOUBLE_EQ(j["sampled"]["run"]["tau"].get<double>(), a->sampled.tau);
  EXPECT_FLOAT_EQ(j["sampled"]["temperature"].get<float>(), 0.7f);
  EXPECT_EQ(j["sampled"]["temperature"].dump(), "0.7");  // as written, not 0.699999988
  EXPECT_FLOAT_EQ(j["sampled"]["top_p"].get<float>(), 0.95f);
  EXPECT_EQ(j["sampled"]["top_k"], 20);
  EXPECT_EQ(j["sampled"]["seed"], 5);
  EXPECT_NE(j["sampled"]["acceptance_rule"].get<std::string>().find("min(1, p/q)"),
            std::string::npos);
  const std::string table = FormatSpecEvalReport(*a);
  EXPECT_NE(table.find(fmt::format("{:.3f}", a->sampled.tau)), std::string::npos) << table;
  EXPECT_NE(table.find("rule at temperature 0.7 (top-p 0.95, top-k 20, seed 5)"),
            std::string::npos) << table;
  // Greedy drafts (the drafter's argmax, q one-hot): another rule, said in the report.
  q_.greedy_drafts = true;
  q_.batch = 1;
  q_.seed = 5;
  auto g = RunSpecEval(q_);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_GT(g->sampled.tau, 1.2);
  const nlohmann::json gj = SpecEvalReportToJson(*g);
  EXPECT_EQ(gj["sampled"]["drafts"], "greedy");
  EXPECT_EQ(j["sampled"]["drafts"], "sampled");
  EXPECT_NE(gj["sampled"]["acceptance_rule"].get<std::string>().find("q one-hot"),
            std::string::npos);
  // Out of range: the field is named.
  q_.top_p = 0.0f;
  const Status bad = RunSpecEval(q_).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.ToString().find("top_p"), std::string::npos) << bad.ToString();
}

TEST_F(RunSpecEvalTest, BatchedRunReportsTheSameAcceptance) {
  auto one = RunSpecEval(q_);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  q_.batch = 3;
  auto three = RunSpecEval(q_);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(one->batch, 1);
  EXPECT_EQ(three->batch, 3);
  EXPECT_GT(one->run.tau, 1.5);  // the trained drafter: the comparison has teeth
  EXPECT_DOUBLE_EQ(three->run.tau, one->run.tau);
  EXPECT_EQ(three->run.verify_steps, one->run.verify_steps);
  EXPECT_EQ(three->run.generated_tokens, 8 * 24);
  EXPECT_EQ(three->run.accept_rate, one->run.accept_rate);
  EXPECT_EQ(three->baseline.generated_tokens, 8 * 24);
  EXPECT_DOUBLE_EQ(three->baseline.tau, 1.0);
  const nlohmann::json j = SpecEvalReportToJson(*three);
  EXPECT_EQ(j["batch"], 3);
  EXPECT_EQ(j["prompt_format"], "ids");
  EXPECT_EQ(j["prompts_skipped"], 0);
  EXPECT_NE(j["acceptance_rule"].get<std::string>().find("greedy"), std::string::npos);
  // More slots than prompts: the batch shrinks to the prompts.
  q_.batch = 20;
  auto wide = RunSpecEval(q_);
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_EQ(wide->batch, 8);
  EXPECT_DOUBLE_EQ(wide->run.tau, one->run.tau);
  q_.batch = 0;
  EXPECT_EQ(RunSpecEval(q_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RunSpecEvalTest, BadPromptLinesFailOrAreCounted) {
  q_.max_prompt_tokens = 10;
  q_.baseline = false;
  Write("{\"input_ids\": [34, 27, 31, 40]}\n"
        "{\"input_ids\": [3, 64]}\n"
        "{\"input_ids\": [3, 4\n"
        "{\"input_ids\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}\n");
  Status s = RunSpecEval(q_).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("p.jsonl:2: id 1 is 64, not in [0, 64)"), std::string::npos)
      << s.ToString();
  q_.skip_bad = true;
  auto r = RunSpecEval(q_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->run.prompts, 1);
  EXPECT_EQ(r->prompt_lines, 4);
  EXPECT_EQ(r->prompts_skipped, 3);
  const nlohmann::json j = SpecEvalReportToJson(*r);
  EXPECT_EQ(j["skipped_by_reason"],
            nlohmann::json({{"bad_token_id", 1}, {"malformed", 1}, {"too_long", 1}}));
  EXPECT_NE(j["skip_reasons"][2].get<std::string>().find(
                "p.jsonl:4: 11 tokens, over the limit of 10 (--max-prompt-tokens)"),
            std::string::npos)
      << j.dump();
  EXPECT_NE(FormatSpecEvalReport(*r).find("1 lines skipped as too_long"), std::string::npos);
}

TEST_F(RunSpecEvalTest, PromptsPastTheTargetsPositionsAreTooLong) {
  // 512 positions - 490 new tokens - block 16 + 1 = 7: the 8-token prompt does not fit.
  q_.max_new_tokens = 490;
  Write("{\"input_ids\": [34, 27, 31, 40, 7, 37, 55, 24]}\n");
  Status s = RunSpecEval(q_).status();
  EXPECT_NE(s.ToString().find("p.jsonl:1: 8 tokens, over the limit of 7 (the target's "
                              "max_position_embeddings 512 - max_new_tokens 490 - block size "
                              "16 + 1)"),
            std::string::npos)
      << s.ToString();
  q_.max_new_tokens = 600;
  s = RunSpecEval(q_).status();
  EXPECT_NE(s.ToString().find("leave no room for a prompt"), std::string::npos) << s.ToString();
}

TEST_F(RunSpecEvalTest, EmptyFilesAndTextWithoutATokenizer) {
  Write("\n\n");
  Status s = RunSpecEval(q_).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("p.jsonl: empty"), std::string::npos) << s.ToString();
  // The golden target's directory has no tokenizer: a text prompt names what is missing.
  Write("{\"question\": \"How many?\"}\n");
  s = RunSpecEval(q_).status();
  EXPECT_NE(s.ToString().find("tokenizer.json"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("p.jsonl"), std::string::npos) << s.ToString();
}

// The golden DFlash drafter's tensors in a fresh DFlash2 drafter (no-op selector), saved as
// a checkpoint: tandem eval measures it through the selector's proposals, greedy about as the
// DFlash drafter (the layers compute DFlash's to bf16 rounding) and sampled; a config with
// selector_top_k 65 (above the kernels' 64 and this vocab of 64) is refused naming the key.
TEST_F(RunSpecEvalTest, DFlash2DrafterProposesWithItsSelector) {
  q_.baseline = false;
  auto plain = RunSpecEval(q_);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto config = LoadDFlashConfig(q_.drafter_dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const DFlashDrafterOptions o{.max_tokens = 64, .num_blocks = 1};
  auto dflash = DFlashDrafter::Create(*config, o, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(dflash.ok()) << dflash.status().ToString();
  ASSERT_TRUE(LoadDFlashWeights(q_.drafter_dir, **dflash).ok());
  DFlashConfig c2 = testing::AsDFlash2(*config);
  auto d2 = DFlashDrafter::Create(c2, o, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  testing::InitFromDFlash((*dflash)->params(), (*d2)->params());
  const std::string dir = dir_.File("dflash2");
  auto saved = SaveDFlashCheckpoint(dir, **d2, DFlashTrainerState{});
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  q_.drafter_dir = dir;
  auto greedy = RunSpecEval(q_);
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  EXPECT_EQ(greedy->run.prompts, plain->run.prompts);
  EXPECT_GT(plain->run.tau, 1.5);
  EXPECT_NEAR(greedy->run.tau, plain->run.tau, 0.25 * plain->run.tau);
  q_.temperature = 0.7f;
  q_.batch = 3;
  auto sampled = RunSpecEval(q_);
  ASSERT_TRUE(sampled.ok()) << sampled.status().ToString();
  EXPECT_EQ(sampled->sampled.prompts, plain->run.prompts);
  EXPECT_GE(sampled->sampled.tau, 1.0);
  c2.dflash2->selector_top_k = 65;
  ASSERT_TRUE(WriteDFlashConfig(dir + "/config.json", c2).ok());
  auto refused = RunSpecEval(q_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("selector_top_k"), std::string::npos)
      << refused.status().ToString();
}

}  // namespace
}  // namespace tandem::models
