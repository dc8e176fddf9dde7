// ConvertChatFile on small files: format detection, bad lines counted with line numbers,
// order kept across threads.
#include "data/chat/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "data/chat/conversation.h"
#include "data/chat/test_util.h"

namespace tandem::chat_data {
namespace {

std::string WriteFile(const std::string& name, const std::string& body) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tandem_chat_data_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << body;
  return path;
}

TEST(ConvertTest, BadLinesAreCountedWithLineNumbersNeverFatal) {
  const std::string good =
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})";
  std::string body;
  body += good + "\n";                                                          // 1
  body += "{not json\n";                                                        // 2
  body += R"({"messages": [{"role": "wizard", "content": "x"}]})" "\n";         // 3
  body += R"({"messages": [{"role": "user"}, {"role": "assistant", "content": "a"}]})" "\n";  // 4
  body += "{\"messages\": [{\"role\": \"user\", \"content\": \"\xC3(\"}]}\n";   // 5
  body += "\n   \n";                                                            // 6, 7 blank
  body += R"({"messages": [{"role": "user", "content": "only a question"}]})" "\n";  // 8
  body += "[1, 2]\n";                                                           // 9
  body += good + "\n";                                                          // 10
  ConvertOptions o;
  o.threads = 3;
  auto r = ConvertChatFile(WriteFile("bad.jsonl", body), Qwen3Encoder(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, ChatFormat::kOpenAI);
  EXPECT_EQ(r->lines, 8);
  EXPECT_EQ(r->conversations, 2);
  EXPECT_EQ(r->offsets.size(), 3u);
  EXPECT_EQ(r->bad.at("not_json"), 1);
  EXPECT_EQ(r->bad.at("unknown_role"), 1);
  EXPECT_EQ(r->bad.at("missing_content"), 1);
  EXPECT_EQ(r->bad.at("invalid_utf8"), 1);
  EXPECT_EQ(r->bad.at("no_assistant"), 1);
  EXPECT_EQ(r->bad.at("not_object"), 1);
  ASSERT_EQ(r->bad_examples.size(), 6u);
  EXPECT_NE(r->bad_examples[0].find("bad.jsonl:2: not valid JSON"), std::string::npos);
  EXPECT_NE(r->bad_examples[1].find(":3: messages[0] has unknown role 'wizard'"), std::string::npos);
  EXPECT_NE(r->bad_examples[3].find(":5: invalid UTF-8 at byte"), std::string::npos);
  EXPECT_NE(r->Summary().find("examples out: 2"), std::string::npos) << r->Summary();
}

// A line with a non-ASCII character where JSON expects a value gave a parse message holding
// half a UTF-8 sequence; the resume state that keeps the first bad lines' messages then threw
// when written, aborting the conversion at its first shard (found by fuzz/chat_set_fuzz.cc).
TEST(ConvertTest, ABadLineQuotingHalfACharacterKeepsTheStateWritable) {
  const std::string good =
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})";
  const std::string body = good + "\n{\"messages\": [{\"role\": \xde\x8aser\"}]}\n" + good + "\n";
  ConvertOptions o;
  o.threads = 1;
  std::vector<std::string> states;
  o.sink = [&](ExampleShard shard) {
    states.push_back(shard.state);
    return Status::Ok();
  };
  auto r = ConvertChatFile(WriteFile("half_char.jsonl", body), Qwen3Encoder(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bad.at("not_json"), 1);
  ASSERT_EQ(r->bad_examples.size(), 1u);
  EXPECT_NE(r->bad_examples[0].find("half_char.jsonl:2: "), std::string::npos) << r->bad_examples[0];
  ASSERT_FALSE(states.empty());
  EXPECT_NE(states.back().find("half_char.jsonl:2: "), std::string::npos) << states.back();
}

TEST(ConvertTest, ShareGptIsDetectedAndMatchesTheSameOpenAiConversation) {
  const std::string sharegpt =
      R"({"conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}]})";
  const std::string openai =
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]})";
  auto a = ConvertChatFile(WriteFile("s.jsonl", sharegpt + "\n" + sharegpt + "\n"), Qwen3Encoder(), {});
  auto b = ConvertChatFile(WriteFile("o.jsonl", openai + "\n" + openai + "\n"), Qwen3Encoder(), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->format, ChatFormat::kShareGpt);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->mask, b->mask);
  EXPECT_EQ(a->offsets.size(), 3u);
  EXPECT_GT(a->loss_tokens, 0);
  // An OpenAI line inside a ShareGPT file is a bad line, not a crash.
  auto c = ConvertChatFile(WriteFile("m.jsonl", sharegpt + "\n" + openai + "\n"), Qwen3Encoder(), {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->bad.at("wrong_format"), 1);
}

TEST(ConvertTest, OrderIsFileOrderWhateverTheThreads) {
  std::string body;
  for (int k = 0; k < 300; ++k) {
    body += R"({"messages": [{"role": "user", "content": "q)" + std::to_string(k) +
            R"("}, {"role": "assistant", "content": "a)" + std::to_string(k) + R"("}]})" "\n";
  }
  const std::string path = WriteFile("many.jsonl", body);
  ConvertOptions one, many;
  one.threads = 1;
  many.threads = 4;
  auto a = ConvertChatFile(path, Qwen3Encoder(), one);
  auto b = ConvertChatFile(path, Qwen3Encoder(), many);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offsets.size(), 301u);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->offsets, b->offsets);
}

TEST(ConvertTest, StreamingInSmallBatchesGivesTheSameExamples) {
  std::string body;
  for (int k = 0; k < 200; ++k) {
    if (k % 31 == 3) body += "\n\r\n";
    body += R"({"messages": [{"role": "user", "content": "q)" + std::to_string(k) +
            R"("}, {"role": "assistant", "content": ")" + std::string(size_t(k % 50), 'x') +
            R"("}]})" "\n";
  }
  body.pop_back();  // the last line has no newline
  const std::string path = WriteFile("stream.jsonl", body);
  ConvertOptions whole, small;
  small.batch_bytes = 97;  // smaller than any line: lines span batches
  small.threads = 3;
  std::vector<int64_t> done;
  small.progress = [&](int64_t d, int64_t total) {
    EXPECT_EQ(total, int64_t(body.size()));
    done.push_back(d);
  };
  auto a = ConvertChatFile(path, Qwen3Encoder(), whole);
  auto b = ConvertChatFile(path, Qwen3Encoder(), small);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_EQ(a->examples, 200);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->mask, b->mask);
  EXPECT_EQ(a->offsets, b->offsets);
  EXPECT_EQ(b->lines, 200);
  EXPECT_EQ(b->tokens_out, int64_t(b->tokens.size()));
  ASSERT_FALSE(done.empty());
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
  EXPECT_EQ(done.back(), int64_t(body.size()));
}

TEST(ConvertTest, WithoutSkipBadTheFirstBadLineIsAnErrorWithItsLine) {
  const std::string good =
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})";
  const std::string path = WriteFile("strict.jsonl", good + "\n" + good + "\n{oops\n" + good + "\n");
  ConvertOptions o;
  o.skip_bad = false;
  auto r = ConvertChatFile(path, Qwen3Encoder(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("strict.jsonl:3: not valid JSON"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("--skip-bad"), std::string::npos);
  o.skip_bad = true;
  auto s = ConvertChatFile(path, Qwen3Encoder(), o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->bad.at("not_json"), 1);
  EXPECT_EQ(s->examples, 3);
}

TEST(ConvertTest, IdsNotBelowVocabAreBadLines) {
  // "<|im_end|>" is id 151645 in Qwen3 and every example holds it; "</think>" (151668) is
  // the largest id these examples hold.
  const std::string good =
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})";
  const std::string path = WriteFile("vocab.jsonl", good + "\n" + good + "\n");
  ConvertOptions o;
  o.vocab = 151645;
  o.vocab_origin = "--vocab";
  auto r = ConvertChatFile(path, Qwen3Encoder(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bad.at("id_out_of_range"), 2);
  EXPECT_EQ(r->examples, 0);
  ASSERT_FALSE(r->bad_examples.empty());
  EXPECT_NE(r->bad_examples[0].find("vocab.jsonl:1: example 0, token"), std::string::npos)
      << r->bad_examples[0];
  EXPECT_NE(r->bad_examples[0].find("is not below vocab 151645 (--vocab)"), std::string::npos);
  o.skip_bad = false;
  EXPECT_FALSE(ConvertChatFile(path, Qwen3Encoder(), o).ok());
  o.vocab = 151669;
  auto fits = ConvertChatFile(path, Qwen3Encoder(), o);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->examples, 2);
}

TEST(ConvertTest, MalformedLinesThatUsedToAbortAreCountedSkips) {
  const std::string good =
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})";
  std::string body = good + "\n";                                                       // 1
  // 50,000 levels in a message field: copying the message recursed once per level.
  body += R"({"messages": [{"role": "user", "content": "hi", "x": )" + std::string(50000, '[') +
          std::string(50000, ']') + R"(}, {"role": "assistant", "content": "yo"}]})" "\n";  // 2
  // A content part whose "type" is not a string threw nlohmann::type_error.
  body += R"({"messages": [{"role": "user", "content": [{"type": 1, "text": "hi"}]}, )"
          R"({"role": "assistant", "content": "yo"}]})" "\n";                            // 3
  // An assistant turn first made the template raise an error naming neither cause.
  body += R"({"messages": [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "hi"}, )"
          R"({"role": "assistant", "content": "ok"}]})" "\n";                            // 4
  body += good + "\n";                                                                  // 5
  const std::string path = WriteFile("abort.jsonl", body);
  ConvertOptions o;
  auto r = ConvertChatFile(path, Qwen3Encoder(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->examples, 2);
  EXPECT_EQ(r->bad.at("not_json"), 1);
  EXPECT_EQ(r->bad.at("missing_content"), 1);
  EXPECT_EQ(r->bad.at("assistant_first"), 1);
  ASSERT_EQ(r->bad_examples.size(), 3u);
  EXPECT_NE(r->bad_examples[0].find("abort.jsonl:2: not valid JSON"), std::string::npos)
      << r->bad_examples[0];
  EXPECT_NE(r->bad_examples[0].find("nested deeper than"), std::string::npos);
  EXPECT_NE(r->bad_examples[1].find("abort.jsonl:3: messages[0] (user) has no string"),
            std::string::npos)
      << r->bad_examples[1];
  EXPECT_NE(r->bad_examples[2].find("abort.jsonl:4: messages[0] is an assistant turn before any "
                                    "user turn (assistant_first)"),
            std::string::npos)
      << r->bad_examples[2];
  // A prompt (no assistant turn required) may end in a lone assistant turn, which is dropped
  // when the prompt is built; an assistant turn before a user turn is refused there too.
  Conversation c;
  BadLine why;
  EXPECT_TRUE(ParseConversation(R"({"messages": [{"role": "assistant", "content": "a"}]})",
                                ChatFormat::kOpenAI, &c, &why, /*require_assistant=*/false));
  EXPECT_FALSE(ParseConversation(R"({"messages": [{"role": "assistant", "content": "a"}]})",
                                 ChatFormat::kOpenAI, &c, &why, /*require_assistant=*/true));
  EXPECT_EQ(why.reason, "assistant_first");
  EXPECT_FALSE(ParseConversation(
      R"({"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]})",
      ChatFormat::kOpenAI, &c, &why, /*require_assistant=*/false));
  EXPECT_EQ(why.reason, "assistant_first");
  // Without --skip-bad the first of them is an error naming its line.
  o.skip_bad = false;
  auto strict = ConvertChatFile(path, Qwen3Encoder(), o);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("abort.jsonl:2: "), std::string::npos);
}

TEST(ConvertTest, IntegersBeyondSixtyFourBitsAreRefusedLines) {
  // JSON parsing turns 2^64 into a double, which the template would print as
  // 1.8446744073709552e+19; 2^64 - 1 still fits (uint64) and is kept.
  auto line = [](const std::string& n) {
    return R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", )"
           R"("tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"n": )" +
           n + R"(, "s": "-99999999999999999999", "f": 1.5e300}}}]}]})" "\n";
  };
  const std::string path = WriteFile(
      "big.jsonl", line("18446744073709551615") + line("18446744073709551616") +
                       line("-9223372036854775809") + line("-9223372036854775808"));
  auto r = ConvertChatFile(path, Qwen3Encoder(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->examples, 2);
  EXPECT_EQ(r->bad.at("integer_too_large"), 2);
  ASSERT_EQ(r->bad_examples.size(), 2u);
  EXPECT_NE(r->bad_examples[0].find("big.jsonl:2: the integer 18446744073709551616 does not fit "
                                    "64 bits"),
            std::string::npos)
      << r->bad_examples[0];
  EXPECT_NE(r->bad_examples[1].find("big.jsonl:3: the integer -9223372036854775809"),
            std::string::npos)
      << r->bad_examples[1];
}

std::string Turns(int messages, const std::string& text) {
  std::string line = R"({"messages": [)";
  for (int k = 0; k < messages; ++k) {
    line += fmt::format(R"({}{{"role": "{}", "content": "{}"}})", k ? ", " : "",
                        k % 2 ? "assistant" : "user", text);
  }
  return line + "]}";
}

TEST(ConvertTest, OverlongLinesAreSkippedUnparsedAndNamed) {
  const std::string good = Turns(2, "hi");
  const std::string huge = Turns(2, std::string(300000, 'x'));  // valid, and 300 KB
  // The first line (read to detect the format) and the last (no newline) are over the limit.
  const std::string body = huge + "\n" + good + "\n\n" + huge + "\n" + good + "\n" + huge;
  const std::string path = WriteFile("long.jsonl", body);
  for (int64_t batch : {int64_t{32} << 20, int64_t{4096}}) {  // within a batch, across many
    ConvertOptions o;
    o.max_line_bytes = 100000;
    o.batch_bytes = batch;
    o.threads = 2;
    auto r = ConvertChatFile(path, Qwen3Encoder(), o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->examples, 2) << batch;
    EXPECT_EQ(r->lines, 5) << batch;
    EXPECT_EQ(r->bad.at("line_too_long"), 3) << batch;
    ASSERT_EQ(r->bad_examples.size(), 3u);
    EXPECT_NE(r->bad_examples[0].find(fmt::format("long.jsonl:1: {} bytes, over the limit of "
                                                  "100000 (--max-line-bytes)",
                                                  huge.size())),
              std::string::npos)
        << r->bad_examples[0];
    EXPECT_NE(r->bad_examples[1].find("long.jsonl:4: "), std::string::npos) << r->bad_examples[1];
    EXPECT_NE(r->bad_examples[2].find("long.jsonl:6: "), std::string::npos) << r->bad_examples[2];
    EXPECT_EQ(r->bytes, int64_t(body.size()));
    // The examples are those of the good lines alone.
    auto alone = ConvertChatFile(WriteFile("short.jsonl", good + "\n" + good + "\n"),
                                 Qwen3Encoder(), {});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(r->tokens, alone->tokens);
    EXPECT_EQ(r->mask, alone->mask);
    // Without --skip-bad the first one is an error naming its line.
    o.skip_bad = false;
    auto strict = ConvertChatFile(path, Qwen3Encoder(), o);
    ASSERT_FALSE(strict.ok());
    EXPECT_NE(strict.status().message().find("long.jsonl:1: "), std::string::npos)
        << strict.status().ToString();
  }
  // The limit off: the same file converts whole.
  ConvertOptions off;
  off.max_line_bytes = 0;
  auto all = ConvertChatFile(path, Qwen3Encoder(), off);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->examples, 5);
}

TEST(ConvertTest, ConversationsOfTooManyTurnsAreCountedSkips) {
  const std::string path = WriteFile(
      "turns.jsonl", Turns(6, "a") + "\n" + Turns(8, "b") + "\n" + Turns(2000, "c") + "\n");
  ConvertOptions o;
  o.max_turns = 6;
  auto r = ConvertChatFile(path, Qwen3Encoder(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->examples, 1);
  EXPECT_EQ(r->bad.at("too_many_turns"), 2);
  ASSERT_EQ(r->bad_examples.size(), 2u);
  EXPECT_NE(r->bad_examples[0].find("turns.jsonl:2: 8 messages, over the limit of 6 "
                                    "(--max-turns)"),
            std::string::npos)
      << r->bad_examples[0];
  // The default (512) takes the 2,000-message line out too, before any rendering.
  auto d = ConvertChatFile(path, Qwen3Encoder(), {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->examples, 2);
  EXPECT_EQ(d->bad.at("too_many_turns"), 1);
}

TEST(ConvertTest, NoKnownFormatIsAClearError) {
  auto r = ConvertChatFile(WriteFile("x.jsonl", "{\"text\": \"hello\"}\n"), Qwen3Encoder(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--format"), std::string::npos);
}

}  // namespace
}  // namespace tandem::chat_data
