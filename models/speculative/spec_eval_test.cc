// Tests of the ids prompt reader that skips bad lines (LoadPromptFile; prompt_set_test.cc
// covers every layout), refusing files without a usable prompt, and of the acceptance
// statistics.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/speculative/spec_eval.h"

namespace tandem::models {
namespace {

TEST(ParsePrompts, SkipsAndCountsBadLines) {
  const std::string text =
      "{\"input_ids\": [1, 2, 3]}\n"
      "\n"
      "not json\n"
      "{\"input_ids\": []}\n"
      "{\"input_ids\": [1, 99]}\n"
      "{\"ids\": [4, 5, 6, 7, 8, 9]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
      "[1, 2]\n"
      "{\"tokens\": [7]}";
  auto set = ParsePrompts(text, "p.jsonl", 50, 5);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->prompts.size(), 2u);
  EXPECT_EQ(set->prompts[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(set->prompts[1], (std::vector<int32_t>{7}));
  EXPECT_EQ(set->lines, 8);
  EXPECT_EQ(set->skipped, 6);
  ASSERT_EQ(set->skip_reasons.size(), 6u);
  EXPECT_EQ(set->skip_reasons[0], "p.jsonl:3: not valid JSON");
  EXPECT_EQ(set->skip_reasons[1], "p.jsonl:4: empty prompt");
  EXPECT_EQ(set->skip_reasons[2], "p.jsonl:5: id 1 is 99, not in [0, 50)");
  EXPECT_EQ(set->skip_reasons[3], "p.jsonl:6: 6 tokens, over the limit of 5");
  EXPECT_EQ(set->skip_reasons[4],
            "p.jsonl:7: no \"input_ids\" array (the file is read as ids, detected from line 1)");
  EXPECT_EQ(set->skip_reasons[5], "p.jsonl:8: not a JSON object");
}

TEST(ParsePrompts, RefusesFilesWithoutAPrompt) {
  Status s = ParsePrompts("", "empty.jsonl", 50, 0).status();
  EXPECT_NE(s.ToString().find("empty.jsonl: empty: no prompt lines"), std::string::npos)
      << s.ToString();
  s = ParsePrompts("{\"x\": 1}\n", "bad.jsonl", 50, 0).status();
  EXPECT_NE(s.ToString().find("bad.jsonl: no usable prompt (1 lines, all skipped; first: "
                              "bad.jsonl:1: no prompt field"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(LoadPromptFile("/nonexistent/p.jsonl", 50, 0).status().code(),
            StatusCode::kNotFound);
}

TEST(SummarizeDecodes, TauAndPerPositionRates) {
  SpecDecodeResult a, b;
  a.accept_lengths = {1, 3, 4};
  a.tokens.assign(9, 0);
  a.seconds = 1.0;
  b.accept_lengths = {2};
  b.tokens.assign(3, 0);
  b.seconds = 0.5;
  const std::vector<SpecDecodeResult> rs = {a, b};
  const SpecEvalStats s = SummarizeDecodes(rs, 4);
  EXPECT_EQ(s.verify_steps, 4);
  EXPECT_DOUBLE_EQ(s.tau, 10.0 / 4);
  EXPECT_DOUBLE_EQ(s.tokens_per_s, 12 / 1.5);
  ASSERT_EQ(s.accept_rate.size(), 4u);
  EXPECT_DOUBLE_EQ(s.accept_rate[1], 3.0 / 4);  // lengths >= 2: 3, 4, 2
  EXPECT_DOUBLE_EQ(s.accept_rate[2], 2.0 / 4);
  EXPECT_DOUBLE_EQ(s.accept_rate[3], 1.0 / 4);
  EXPECT_DOUBLE_EQ(s.cond_rate[2], 2.0 / 3);
  SpecEvalReport r;
  r.run = s;
  r.baseline = SummarizeDecodes(rs, 1);
  const nlohmann::json j = SpecEvalReportToJson(r);
  EXPECT_DOUBLE_EQ(j["run"]["tau"].get<double>(), 2.5);
  EXPECT_EQ(j["run"]["accept_rate_by_position"].size(), 3u);
  EXPECT_NE(FormatSpecEvalReport(r).find("speedup over block size 1"), std::string::npos);
}

}  // namespace
}  // namespace tandem::models
