// Tests of the prompt files of `tandem eval` (prompt_set.h): every layout (ids, OpenAI and
// ShareGPT chat, mt-bench, gsm8k, math500, humaneval, mbpp) read from small files written
// here and rendered through the Qwen3 tokenizer fixture's own chat template; detection and
// --format; and bad input: empty files, malformed lines, over-long prompts, ids outside the
// vocab, each an error naming file:line or (skip_bad) skipped and counted by reason.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/chat/test_util.h"
#include "models/io/model_test_util.h"
#include "models/speculative/prompt_set.h"

namespace tandem::models {
namespace {

constexpr int64_t kVocab = 151936;  // Qwen3's

// The ids of `text` by the fixture's tokenizer alone (no template).
std::vector<int32_t> Tokens(const std::string& text) {
  tokenizer::EncodeScratch scratch;
  auto ids = chat_data::Qwen3Encoder().tokenizer().Encode(text, scratch);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return std::vector<int32_t>(ids->begin(), ids->end());
}

// The Qwen3 chat template's prompt for one user message, written out by hand.
std::string UserPrompt(const std::string& text) {
  return "<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n";
}

class PromptSetTest : public ::testing::Test {
 protected:
  PromptSetTest() {
    options_.vocab = kVocab;
    options_.encoder = &chat_data::Qwen3Encoder();
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.File(name);
    std::ofstream(path) << text;
    return path;
  }
  Result<PromptSet> Load(const std::string& text) {
    return LoadPromptSet(Write("p.jsonl", text), options_);
  }
  testing::ScratchDir dir_;
  PromptLoadOptions options_;
};

TEST_F(PromptSetTest, ReadsIdsAsIs) {
  auto set = Load("{\"input_ids\": [1, 2, 3]}\n\n{\"tokens\": [151935]}\n");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->format, PromptFormat::kIds);
  ASSERT_EQ(set->prompts.size(), 2u);
  EXPECT_EQ(set->prompts[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(set->prompts[1], (std::vector<int32_t>{151935}));
  EXPECT_EQ(set->line_numbers, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(set->lines, 2);
  EXPECT_EQ(set->skipped, 0);
}

TEST_F(PromptSetTest, ChatMessagesThroughTheModelsTemplate) {
  // A system turn, a user turn and a trailing assistant turn (dropped: the model answers).
  auto set = Load(
      "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
      "{\"role\": \"user\", \"content\": \"What is 2+2?\"}, "
      "{\"role\": \"assistant\", \"content\": \"4\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there\"}]}\n");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->format, PromptFormat::kOpenAI);
  ASSERT_EQ(set->prompts.size(), 2u);
  EXPECT_EQ(set->prompts[0],
            Tokens("<|im_start|>system\nBe brief.<|im_end|>\n" + UserPrompt("What is 2+2?")));
  EXPECT_EQ(set->prompts[1], Tokens(UserPrompt("Hi there")));
  // The special tokens are single ids, not their characters.
  EXPECT_EQ(set->prompts[1][0], 151644);  // <|im_start|>

  // The same conversation as ShareGPT reads the same.
  auto share = Load(
      "{\"conversations\": [{\"from\": \"system\", \"value\": \"Be brief.\"}, "
      "{\"from\": \"human\", \"value\": \"What is 2+2?\"}, {\"from\": \"gpt\", \"value\": "
      "\"4\"}]}\n");
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  EXPECT_EQ(share->format, PromptFormat::kShareGpt);
  EXPECT_EQ(share->prompts[0], set->prompts[0]);
}

TEST_F(PromptSetTest, PublicSetLayoutsByFieldName) {
  struct Case {
    std::string line, text;
    PromptFormat format;
  };
  const std::vector<Case> cases = {
      {R"({"question": "Tom has 3 apples.", "answer": "#### 3"})", "Tom has 3 apples.",
       PromptFormat::kGsm8k},
      {R"({"problem": "Find x if 2x=4.", "solution": "x=2", "level": "Level 1"})",
       "Find x if 2x=4.", PromptFormat::kMath500},
      {R"({"task_id": "HumanEval/0", "prompt": "def f(x):\n    ", "entry_point": "f"})",
       "def f(x):\n    ", PromptFormat::kHumanEval},
      {R"({"task_id": 2, "text": "Write a function.", "code": "def g(): pass"})",
       "Write a function.", PromptFormat::kMbpp},
      {R"j({"task_id": 3, "prompt": "Write g.", "test_list": ["assert g()"]})j", "Write g.",
       PromptFormat::kMbpp},
      {R"({"question_id": 81, "category": "writing", "turns": ["Write a poem.", "Shorter."]})",
       "Write a poem.", PromptFormat::kMtBench},
  };
  for (const Case& c : cases) {
    auto set = Load(c.line + "\n");
    ASSERT_TRUE(set.ok()) << c.line << ": " << set.status().ToString();
    EXPECT_EQ(set->format, c.format) << c.line;
    ASSERT_EQ(set->prompts.size(), 1u);
    EXPECT_EQ(set->prompts[0], Tokens(UserPrompt(c.text))) << c.line;
  }
}

TEST_F(PromptSetTest, FormatOverridesDetection) {
  const std::string line = R"({"question": "Q?", "prompt": "P?"})";
  auto detected = Load(line);
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ(detected->format, PromptFormat::kGsm8k);
  options_.format = PromptFormat::kHumanEval;
  auto given = Load(line);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->format, PromptFormat::kHumanEval);
  EXPECT_EQ(given->prompts[0], Tokens(UserPrompt("P?")));
  // A line without the given layout's field is bad, and the message says how it was read.
  options_.format = PromptFormat::kMath500;
  Status s = Load(line).status();
  EXPECT_NE(s.ToString().find("p.jsonl:1: no \"problem\" field (the file is read as math500, "
                              "given as math500)"),
            std::string::npos)
      << s.ToString();
  options_.format = PromptFormat::kMbpp;
  s = Load(R"({"question": "Q?"})").status();
  EXPECT_NE(s.ToString().find("p.jsonl:1: no \"text\" or \"prompt\" field"), std::string::npos)
      << s.ToString();
  // A tokenizer whose ids do not fit the model's vocab: the message says so.
  options_.format = PromptFormat::kAuto;
  options_.vocab = 1000;
  s = Load(line).status();
  EXPECT_NE(s.ToString().find("not in [0, 1000) (the tokenizer's ids do not fit"),
            std::string::npos)
      << s.ToString();
  EXPECT_FALSE(ParsePromptFormat("squad").ok());
  for (const char* name : {"auto", "ids", "openai", "sharegpt", "mt-bench", "gsm8k", "math500",
                           "humaneval", "mbpp"}) {
    auto f = ParsePromptFormat(name);
    ASSERT_TRUE(f.ok()) << name;
    EXPECT_STREQ(PromptFormatName(*f), name);
  }
}

TEST_F(PromptSetTest, EmptyFilesAreErrors) {
  for (const std::string text : {"", "\n  \n\t\n"}) {
    Status s = Load(text).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.ToString().find("p.jsonl: empty: no prompt lines"), std::string::npos)
        << s.ToString();
    options_.skip_bad = true;  // nothing to skip either
  }
  EXPECT_EQ(LoadPromptSet(dir_.File("missing.jsonl"), options_).status().code(),
            StatusCode::kNotFound);
}

// Each kind of bad line: an error naming file:line without skip_bad; skipped and counted by
// reason with it.
TEST_F(PromptSetTest, BadLinesFailOrAreSkippedAndCounted) {
  options_.max_tokens = 4;
  options_.max_tokens_origin = "max positions 20 - max_new_tokens 16";
  struct Case {
    std::string line, reason, message;
  };
  const std::vector<Case> cases = {
      {"{\"input_ids\": [1, 2, ", "malformed", "p.jsonl:2: not valid JSON"},
      {"[1, 2]", "malformed", "p.jsonl:2: not a JSON object"},
      {"{\"input_ids\": " + std::string(50000, '[') + std::string(50000, ']') + "}", "malformed",
       "p.jsonl:2: nested deeper than 128 levels"},
      {"{\"input_ids\": [1, \"x\"]}", "malformed", "p.jsonl:2: id 1 is not an integer"},
      {"{\"input_ids\": 7}", "malformed", "p.jsonl:2: \"input_ids\" is not an array"},
      {"{\"question\": \"Q\"}", "malformed",
       "p.jsonl:2: no \"input_ids\" array (the file is read as ids, detected from line 1)"},
      {"{\"input_ids\": []}", "empty", "p.jsonl:2: empty prompt"},
      {"{\"input_ids\": [1, 2, 3, 4, 5]}", "too_long",
       "p.jsonl:2: 5 tokens, over the limit of 4 (max positions 20 - max_new_tokens 16)"},
      {"{\"input_ids\": [1, 151936]}", "bad_token_id",
       "p.jsonl:2: id 1 is 151936, not in [0, 151936)"},
      {"{\"input_ids\": [-1]}", "bad_token_id", "p.jsonl:2: id 0 is -1, not in [0, 151936)"},
  };
  for (const Case& c : cases) {
    const std::string text = "{\"input_ids\": [5, 6]}\n" + c.line + "\n{\"ids\": [7]}\n";
    options_.skip_bad = false;
    Status s = Load(text).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.line;
    EXPECT_NE(s.ToString().find("/p.jsonl:" + c.message.substr(8) + " (--skip-bad"),
              std::string::npos)
        << c.line << ": " << s.ToString();
    options_.skip_bad = true;
    auto set = Load(text);
    ASSERT_TRUE(set.ok()) << c.line << ": " << set.status().ToString();
    EXPECT_EQ(set->prompts, (std::vector<std::vector<int32_t>>{{5, 6}, {7}})) << c.line;
    EXPECT_EQ(set->line_numbers, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(set->lines, 3);
    EXPECT_EQ(set->skipped, 1);
    EXPECT_EQ(set->skipped_by_reason, (std::map<std::string, int64_t>{{c.reason, 1}})) << c.line;
    ASSERT_EQ(set->skip_reasons.size(), 1u);
    EXPECT_EQ(set->skip_reasons[0], dir_.File(c.message));
  }
}

TEST_F(PromptSetTest, OverlongLinesAreBadLinesNeverParsed) {
  // The first line is over the limit too: the layout comes from the next one.
  options_.max_line_bytes = 1000;
  const std::string huge = "{\"question\": \"" + std::string(5000, 'x') + "\"}";
  const std::string text = huge + "\n{\"question\": \"Q\"}\n" + huge + "\n";
  options_.skip_bad = false;
  Status s = Load(text).status();
  EXPECT_NE(s.ToString().find("p.jsonl:1: 5016 bytes, over the limit of 1000 (--max-line-bytes)"),
            std::string::npos)
      << s.ToString();
  options_.skip_bad = true;
  auto set = Load(text);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->format, PromptFormat::kGsm8k);
  EXPECT_EQ(set->line_numbers, (std::vector<int64_t>{2}));
  EXPECT_EQ(set->skipped_by_reason, (std::map<std::string, int64_t>{{"line_too_long", 2}}));
}

TEST_F(PromptSetTest, BadTextAndChatLines) {
  options_.skip_bad = true;
  options_.max_tokens = 12;
  auto set = Load(
      "{\"question\": \"Short?\"}\n"
      "{\"question\": \"\"}\n"
      "{\"question\": 3}\n"
      "{\"question\": \"" + std::string(200, 'a') + " b c d e f g h i j k\"}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->prompts.size(), 1u);
  EXPECT_EQ(set->skipped_by_reason,
            (std::map<std::string, int64_t>{{"empty", 1}, {"malformed", 2}, {"too_long", 1}}));
  EXPECT_EQ(set->skip_reasons[0], dir_.File("p.jsonl:2: \"question\" is empty"));
  EXPECT_NE(set->skip_reasons[1].find("p.jsonl:3: \"question\" is not a string"),
            std::string::npos);
  EXPECT_NE(set->skip_reasons[3].find("p.jsonl:5: no \"question\" field"), std::string::npos);

  // Chat lines that are malformed or leave nothing to answer.
  auto chat = Load(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n"
      "{\"messages\": [{\"role\": \"assistant\", \"content\": \"Hello\"}]}\n"
      "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}\n"
      "{\"messages\": []}\n");
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  EXPECT_EQ(chat->prompts.size(), 1u);
  EXPECT_EQ(chat->skipped_by_reason,
            (std::map<std::string, int64_t>{{"malformed", 2}, {"template_error", 1}}));
  EXPECT_NE(chat->skip_reasons[0].find("p.jsonl:2: no message to answer"), std::string::npos);
  EXPECT_NE(chat->skip_reasons[1].find("unknown role 'wizard'"), std::string::npos);

  // Every line bad: an error even with skip_bad.
  Status s = Load("{\"question\": \"\"}\nnot json\n").status();
  EXPECT_NE(s.ToString().find("p.jsonl: no usable prompt (2 lines, all skipped; first: /"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("/p.jsonl:1: \"question\" is empty)"), std::string::npos)
      << s.ToString();
  s = Load("{\"x\": 1}\n").status();
  EXPECT_NE(s.ToString().find("no prompt field"), std::string::npos) << s.ToString();
}

TEST_F(PromptSetTest, TokenizerFromADirectoryOrRefused) {
  options_.encoder = nullptr;
  Status s = Load("{\"question\": \"Q?\"}\n").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("p.jsonl: text and chat prompts need the model's tokenizer"),
            std::string::npos)
      << s.ToString();
  // Not even skip_bad hides it: the whole file would be skipped.
  options_.skip_bad = true;
  EXPECT_FALSE(Load("{\"question\": \"Q?\"}\n").ok());
  // A directory without tokenizer files names the file it looked for.
  options_.tokenizer_dir = dir_.path();
  s = Load("{\"question\": \"Q?\"}\n").status();
  EXPECT_NE(s.ToString().find("tokenizer.json"), std::string::npos) << s.ToString();
  // Loaded from a directory, the result is the same as with the shared encoder.
  options_.tokenizer_dir = tokenizer::Qwen3FixtureDir();
  auto set = Load("{\"question\": \"Q?\"}\n");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->prompts[0], Tokens(UserPrompt("Q?")));
  // enable_thinking reaches the template: Qwen3's renders an empty think block for false.
  options_.enable_thinking = false;
  set = Load("{\"question\": \"Q?\"}\n");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->prompts[0], Tokens(UserPrompt("Q?") + "<think>\n\n</think>\n\n"));
}

}  // namespace
}  // namespace tandem::models
