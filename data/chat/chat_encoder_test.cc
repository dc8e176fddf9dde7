// Loss masks against the golden (version 2: masks defined on transformers' tokens, computed in
// Python from its own encodings of each generation prompt; here from tandem's tokenizer and
// template), split turns, last-turn-only and length limits. Every mask is compared, with
// enable_thinking=false too.
#include "data/chat/chat_encoder.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/chat/test_util.h"

namespace tandem::chat_data {
namespace {

using nlohmann::ordered_json;

std::string MaskString(const std::vector<uint8_t>& m) {
  std::string s;
  for (uint8_t x : m) s += char('0' + x);
  return s;
}

struct Golden {
  ordered_json full;                  // the whole conversation's record
  std::vector<ordered_json> splits;   // its per-turn records
};

std::vector<Golden> LoadGolden() {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/tokenizer_golden.jsonl");
  EXPECT_TRUE(in);
  std::vector<Golden> out;
  std::string line;
  while (std::getline(in, line)) {
    ordered_json r = ordered_json::parse(line);
    if (r.value("kind", "") != "chat" || !r.contains("mask")) continue;
    if (r["split"].is_null()) out.push_back({r, {}});
    else out.back().splits.push_back(r);
  }
  return out;
}

ChatEncodeOptions OptionsFor(const ordered_json& r, bool reasoning, SplitTurns split) {
  ChatEncodeOptions o;
  if (!r["enable_thinking"].is_null()) o.enable_thinking = r["enable_thinking"].get<bool>();
  o.train_reasoning = reasoning;
  o.split_turns = split;
  return o;
}

Conversation ConversationOf(const ordered_json& r) {
  return {r["messages"], r.contains("tools") ? r["tools"] : ordered_json()};
}

TEST(ChatEncoderTest, MasksMatchGoldenAssistantSpans) {
  auto golden = LoadGolden();
  ASSERT_GT(golden.size(), 300u);
  ChatEncoder::Scratch scratch;
  int mismatches = 0, checked = 0, thinking_off = 0;
  for (const Golden& g : golden) {
    for (bool reasoning : {true, false}) {
      const ChatEncoder enc =
          Qwen3Encoder().WithOptions(OptionsFor(g.full, reasoning, SplitTurns::kOff));
      EncodeOutcome o = enc.Encode(ConversationOf(g.full), scratch);
      ASSERT_TRUE(o.error.empty()) << o.error;
      ASSERT_EQ(o.examples.size(), 1u);
      EXPECT_EQ(o.examples[0].ids, g.full["ids"].get<std::vector<uint32_t>>());
      const std::string want = g.full[reasoning ? "mask" : "mask_no_reasoning"];
      ++checked;
      thinking_off += !g.full["enable_thinking"].is_null() && !g.full["enable_thinking"].get<bool>();
      if (MaskString(o.examples[0].mask) != want && ++mismatches <= 3) {
        ADD_FAILURE() << "mask differs (reasoning " << reasoning << ") for "
                      << g.full["text"].dump() << "\n got  " << MaskString(o.examples[0].mask)
                      << "\n want " << want;
      }
    }
  }
  std::printf("compared %d masks, %d of them with enable_thinking=false\n", checked, thinking_off);
  EXPECT_EQ(checked, 2 * int(golden.size()));
  EXPECT_GT(thinking_off, 150);
  EXPECT_EQ(mismatches, 0);
}

// Independent of any mask rule in Python: the last assistant turn starts where transformers'
// tokens of the generation prompt (the golden's add_generation_prompt record) stop agreeing
// with its tokens of the whole conversation, and ends with the first <|im_end|> after that.
TEST(ChatEncoderTest, LastTurnStartsWhereTransformersPromptTokensStop) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/tokenizer_golden.jsonl");
  std::string line;
  std::vector<ordered_json> recs;
  while (std::getline(in, line)) {
    ordered_json r = ordered_json::parse(line);
    if (r.value("kind", "") == "chat" && r["split"].is_null()) recs.push_back(std::move(r));
  }
  ChatEncoder::Scratch scratch;
  int checked = 0;
  for (size_t k = 0; k + 1 < recs.size(); ++k) {
    const ordered_json& full = recs[k];
    const ordered_json& gen = recs[k + 1];
    if (full["add_generation_prompt"].get<bool>() || !gen["add_generation_prompt"].get<bool>()) continue;
    ChatEncodeOptions o = OptionsFor(full, true, SplitTurns::kOff);
    o.last_turn_only = true;
    EncodeOutcome out = Qwen3Encoder().WithOptions(o).Encode(ConversationOf(full), scratch);
    ASSERT_EQ(out.examples.size(), 1u);
    const auto f = full["ids"].get<std::vector<uint32_t>>();
    const auto p = gen["ids"].get<std::vector<uint32_t>>();
    size_t s = 0;
    while (s < p.size() && s < f.size() && p[s] == f[s]) ++s;
    size_t e = s;
    while (e < f.size() && f[e] != 151645u) ++e;
    std::string want(f.size(), '0');
    for (size_t j = s; j <= e && j < f.size(); ++j) want[j] = '1';
    EXPECT_EQ(MaskString(out.examples[0].mask), want) << full["text"].dump();
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

TEST(ChatEncoderTest, SplitTurnsGiveOneExamplePerAssistantTurnAsSeenThen) {
  ChatEncoder::Scratch scratch;
  int checked = 0;
  for (const Golden& g : LoadGolden()) {
    if (g.splits.empty()) continue;
    const ChatEncoder enc = Qwen3Encoder().WithOptions(OptionsFor(g.full, true, SplitTurns::kOn));
    EncodeOutcome o = enc.Encode(ConversationOf(g.full), scratch);
    ASSERT_EQ(o.examples.size(), g.splits.size());
    for (size_t k = 0; k < g.splits.size(); ++k) {
      EXPECT_EQ(o.examples[k].ids, g.splits[k]["ids"].get<std::vector<uint32_t>>());
      EXPECT_EQ(MaskString(o.examples[k].mask), g.splits[k]["mask"].get<std::string>());
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

Conversation TwoTurns(bool reasoning_first) {
  ordered_json m = ordered_json::array();
  m.push_back({{"role", "user"}, {"content", "hi"}});
  ordered_json a1 = {{"role", "assistant"}, {"content", "hello there"}};
  if (reasoning_first) a1["reasoning_content"] = "greet back";
  m.push_back(a1);
  m.push_back({{"role", "user"}, {"content", "bye"}});
  m.push_back({{"role", "assistant"}, {"content", "goodbye"}});
  return {m, ordered_json()};
}

TEST(ChatEncoderTest, AutoSplitsOnlyWhenEarlierTurnsCarryReasoning) {
  ChatEncoder::Scratch scratch;
  const ChatEncoder enc = Qwen3Encoder();  // split_turns auto
  EXPECT_EQ(enc.Encode(TwoTurns(false), scratch).examples.size(), 1u);
  EXPECT_EQ(enc.Encode(TwoTurns(true), scratch).examples.size(), 2u);
}

TEST(ChatEncoderTest, LastTurnOnlyMasksOneSpan) {
  ChatEncoder::Scratch scratch;
  ChatEncodeOptions o;
  o.last_turn_only = true;
  o.split_turns = SplitTurns::kOff;
  auto r = Qwen3Encoder().WithOptions(o).Encode(TwoTurns(false), scratch);
  ASSERT_EQ(r.examples.size(), 1u);
  const Example& ex = r.examples[0];
  const std::string text = Qwen3Encoder().tokenizer().Decode(ex.ids);
  std::vector<uint32_t> masked;
  for (size_t k = 0; k < ex.ids.size(); ++k) {
    if (ex.mask[k]) masked.push_back(ex.ids[k]);
  }
  EXPECT_EQ(Qwen3Encoder().tokenizer().Decode(masked), "<think>\n\n</think>\n\ngoodbye<|im_end|>");
}

// The Qwen3 fixture with a base model's tokenizer_config: eos_token <|endoftext|>, which the
// chat template never writes.
const ChatEncoder& BaseConfigEncoder() {
  static const ChatEncoder* enc = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("tandem_base_config_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string fixture = tokenizer::Qwen3FixtureDir();
    std::filesystem::copy_file(fixture + "/tokenizer.json", dir / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::ifstream in(fixture + "/tokenizer_config.json");
    ordered_json cfg = ordered_json::parse(in);
    cfg["eos_token"] = "<|endoftext|>";
    std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
    auto e = ChatEncoder::Load(dir.string(), {});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return new ChatEncoder(std::move(e).value());
  }();
  return *enc;
}

std::string MaskedText(const ChatEncoder& enc, const Example& ex) {
  std::vector<uint32_t> masked;
  for (size_t k = 0; k < ex.ids.size(); ++k) {
    if (ex.mask[k]) masked.push_back(ex.ids[k]);
  }
  return enc.tokenizer().Decode(masked);
}

TEST(ChatEncoderTest, AssistantSpansEndWithTheirTurnWhenTheEndTokenNeverComes) {
  // With eos_token <|endoftext|> the span of the first answer once ran on through the next
  // user turn to the end of the example.
  Conversation c;
  c.messages = ordered_json::parse(
      R"([{"role": "user", "content": "first question"}, {"role": "assistant", "content": "A1"},
          {"role": "user", "content": "second question"}, {"role": "assistant", "content": "A2"}])");
  ChatEncoder::Scratch scratch;
  ChatEncodeOptions o;
  o.split_turns = SplitTurns::kOff;
  const ChatEncoder base = BaseConfigEncoder().WithOptions(o);
  EncodeOutcome r = base.Encode(c, scratch);
  ASSERT_EQ(r.examples.size(), 1u) << r.error;
  const std::string masked = MaskedText(base, r.examples[0]);
  EXPECT_EQ(masked.find("question"), std::string::npos) << masked;
  EXPECT_EQ(masked, "A1<|im_end|>\n<think>\n\n</think>\n\nA2<|im_end|>\n");
  EXPECT_EQ(r.warnings.at("no_end_token"), 2);
  // The chat config's spans are unchanged, with no warning: the end token comes first.
  const ChatEncoder chat = Qwen3Encoder().WithOptions(o);
  EncodeOutcome q = chat.Encode(c, scratch);
  ASSERT_EQ(q.examples.size(), 1u);
  EXPECT_EQ(q.examples[0].ids, r.examples[0].ids);
  EXPECT_EQ(MaskedText(chat, q.examples[0]), "A1<|im_end|><think>\n\n</think>\n\nA2<|im_end|>");
  EXPECT_TRUE(q.warnings.empty());
}

TEST(ChatEncoderTest, OverlongExamplesAreTruncatedOrDroppedAndCounted) {
  ChatEncoder::Scratch scratch;
  ChatEncodeOptions o;
  o.split_turns = SplitTurns::kOff;
  o.max_tokens = 12;
  auto t = Qwen3Encoder().WithOptions(o).Encode(TwoTurns(false), scratch);
  ASSERT_EQ(t.examples.size(), 1u);
  EXPECT_EQ(t.examples[0].ids.size(), 12u);
  EXPECT_EQ(t.events["truncated"], 1);
  o.drop_overlong = true;
  auto d = Qwen3Encoder().WithOptions(o).Encode(TwoTurns(false), scratch);
  EXPECT_TRUE(d.examples.empty());
  EXPECT_EQ(d.events["too_long"], 1);
  o.drop_overlong = false;
  o.max_tokens = 3;  // cut before the first assistant token: nothing to learn
  auto n = Qwen3Encoder().WithOptions(o).Encode(TwoTurns(false), scratch);
  EXPECT_TRUE(n.examples.empty());
  EXPECT_EQ(n.events["no_loss"], 1);
}

// A model directory with the Qwen3 tokenizer and `chat_template`.
std::string ModelDirWithTemplate(const std::string& name, const std::string& chat_template) {
  const std::string dir = ::testing::TempDir() + "/tandem_chat_encoder_" + name;
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(tokenizer::Qwen3FixtureDir() + "/tokenizer.json",
                             dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/tokenizer_config.json", std::ios::binary | std::ios::trunc)
      << ordered_json{{"chat_template", chat_template}, {"eos_token", "<|im_end|>"}}.dump();
  return dir;
}

TEST(ChatEncoderTest, TemplateLimitsAreTemplateErrorsForThatLineOrRefusedAtLoad) {
  // The template recurses without end only for a message "boom": that line is a
  // template_error naming the limit; the encoder goes on with the next line.
  const std::string dir = ModelDirWithTemplate(
      "limits", "{% macro f(n) %}{{ f(n) }}{% endmacro %}{% for m in messages %}"
                "{% if m.content == 'boom' %}{{ f(0) }}{% endif %}<|im_start|>{{ m.role }}\n"
                "{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  auto enc = ChatEncoder::Load(dir, {});
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  ChatEncoder::Scratch scratch;
  Conversation boom{ordered_json::parse(R"([{"role": "user", "content": "boom"},
                                            {"role": "assistant", "content": "a"}])"),
                    ordered_json()};
  EncodeOutcome bad = enc->Encode(boom, scratch);
  EXPECT_TRUE(bad.examples.empty());
  EXPECT_EQ(bad.events["template_error"], 1);
  EXPECT_NE(bad.error.find("macro calls nested deeper than 64 levels"), std::string::npos)
      << bad.error;
  Conversation fine{ordered_json::parse(R"([{"role": "user", "content": "hi"},
                                            {"role": "assistant", "content": "a"}])"),
                    ordered_json()};
  EncodeOutcome ok = enc->Encode(fine, scratch);
  EXPECT_EQ(ok.events.count("template_error"), 0u) << ok.error;
  EXPECT_EQ(ok.examples.size(), 1u);
  // A template that cannot render anything is refused when the model is loaded.
  std::string deep;
  for (int k = 0; k < 10000; ++k) deep += "{% if true %}";
  for (int k = 0; k < 10000; ++k) deep += "{% endif %}";
  const std::string deep_dir = ModelDirWithTemplate("deep", deep);
  auto refused = ChatEncoder::Load(deep_dir, {});
  std::filesystem::remove_all(deep_dir);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("blocks nested deeper than 64 levels"),
            std::string::npos)
      << refused.status().ToString();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::chat_data
