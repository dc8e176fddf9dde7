// WriteChatSet: a sharded conversion is the same examples as an in-memory one; shards stay
// within their bound; a process killed (SIGKILL, in a forked child) at each point of writing
// a shard resumes to exactly the set and counts of an uninterrupted run; a resume with other
// settings (the caller's, or the shard bound, format, vocab of the conversion) or on a changed
// input is refused, naming each setting with both values.
#include "data/chat/chat_set.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/corpus/sharded_set.h"
#include "data/tokenizer/fixture.h"

namespace tandem::chat_data {
namespace {

namespace fs = std::filesystem;

const chat_data::ChatEncoder& Encoder() {
  static const chat_data::ChatEncoder* enc = [] {
    auto e = chat_data::ChatEncoder::Load(tokenizer::Qwen3FixtureDir(), {});
    if (!e.ok()) {
      ADD_FAILURE() << e.status().ToString() << " (run scripts/install-deps.sh)";
      std::abort();
    }
    return new chat_data::ChatEncoder(std::move(e).value());
  }();
  return *enc;
}

fs::path TestDir() {
  return fs::temp_directory_path() / ("tandem_chat_set_test_" + std::to_string(::getpid()));
}

// 120 conversations of varied length, a bad line every 17th, blank lines now and then.
std::string WriteInput(const std::string& name) {
  fs::create_directories(TestDir());
  const std::string path = (TestDir() / name).string();
  std::ofstream out(path, std::ios::binary);
  for (int k = 0; k < 120; ++k) {
    if (k % 17 == 5) out << "{broken " << k << "\n";
    if (k % 23 == 7) out << "\n";
    std::string answer;
    for (int w = 0; w < 1 + (k * 7) % 40; ++w) answer += "word" + std::to_string(w * k) + " ";
    out << R"({"messages": [{"role": "user", "content": "question )" << k
        << R"("}, {"role": "assistant", "content": ")" << answer << "\"}]}\n";
  }
  return path;
}

ChatSetOptions Options() {
  ChatSetOptions o;
  o.convert.threads = 2;
  o.convert.shard_tokens = 400;
  o.convert.batch_bytes = 1500;  // many batches; lines cross batch ends
  o.settings = {{"--model", "/models/a"}, {"--turns", "all"}};
  return o;
}

struct SetContents {
  std::vector<std::vector<uint32_t>> ids;
  std::vector<std::vector<uint8_t>> masks;
};

SetContents Read(const std::string& dir) {
  auto c = data::OpenShardedSet(dir, data::BinaryCheck::kFull);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  SetContents s;
  for (int64_t d = 0; c.ok() && d < c->documents(); ++d) {
    data::Document doc = c->doc(d);
    s.ids.emplace_back(doc.ids.begin(), doc.ids.end());
    s.masks.emplace_back(doc.mask.begin(), doc.mask.end());
  }
  return s;
}

void ExpectSameCounts(const chat_data::ConvertResult& a, const chat_data::ConvertResult& b) {
  EXPECT_EQ(a.lines, b.lines);
  EXPECT_EQ(a.conversations, b.conversations);
  EXPECT_EQ(a.examples, b.examples);
  EXPECT_EQ(a.tokens_out, b.tokens_out);
  EXPECT_EQ(a.loss_tokens, b.loss_tokens);
  EXPECT_EQ(a.shards, b.shards);
  EXPECT_EQ(a.bad, b.bad);
  EXPECT_EQ(a.bad_examples, b.bad_examples);
}

TEST(ChatSetTest, ShardsHoldTheInMemoryExamplesWithinTheirBound) {
  const std::string input = WriteInput("in.jsonl");
  const std::string dir = (TestDir() / "whole.tdata").string();
  auto r = WriteChatSet(input, dir, Encoder(), Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->conversations, 120);
  EXPECT_EQ(r->bad.at("not_json"), 7);
  EXPECT_GT(r->shards, 5);

  chat_data::ConvertOptions mem;
  mem.threads = 1;
  auto m = chat_data::ConvertChatFile(input, Encoder(), mem);
  ASSERT_TRUE(m.ok());
  const SetContents s = Read(dir);
  ASSERT_EQ(int64_t(s.ids.size()), m->examples);
  for (size_t d = 0; d < s.ids.size(); ++d) {
    const auto b = m->offsets[d], e = m->offsets[d + 1];
    EXPECT_EQ(s.ids[d], std::vector<uint32_t>(m->tokens.begin() + long(b), m->tokens.begin() + long(e)));
    EXPECT_EQ(s.masks[d], std::vector<uint8_t>(m->mask.begin() + long(b), m->mask.begin() + long(e)));
  }
  auto manifest = data::ReadShardManifest(dir);
  ASSERT_TRUE(manifest.ok());
  EXPECT_TRUE(manifest->complete);
  EXPECT_EQ(int64_t(manifest->shards.size()), r->shards);
  for (const data::ShardEntry& e : manifest->shards) {
    // One conversation is one example here, so only a lone example may pass the bound.
    EXPECT_TRUE(e.tokens <= 400 || e.documents == 1) << e.name << ": " << e.tokens;
  }
}

TEST(ChatSetTest, AKillAtAnyPointResumesToTheUninterruptedSet) {
  const std::string input = WriteInput("kill.jsonl");
  const std::string ref_dir = (TestDir() / "ref.tdata").string();
  auto ref = WriteChatSet(input, ref_dir, Encoder(), Options());
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const SetContents want = Read(ref_dir);
  for (const char* point : {"shard_renamed", "shard_recorded"}) {
    for (int64_t shard : {int64_t{0}, int64_t{3}, ref->shards - 1}) {
      SCOPED_TRACE(fmt::format("killed at {} of shard {}", point, shard));
      const std::string dir = (TestDir() / fmt::format("k_{}_{}.tdata", point, shard)).string();
      fs::remove_all(dir);
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ChatSetOptions o = Options();
        o.fault = [&](std::string_view at, int64_t k) {
          if (at == point && k == shard) ::raise(SIGKILL);
        };
        (void)WriteChatSet(input, dir, Encoder(), o);
        ::_exit(0);  // not reached: the kill comes first
      }
      int wstatus = 0;
      ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
      ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) << wstatus;
      EXPECT_FALSE(data::OpenShardedSet(dir, data::BinaryCheck::kStructure).ok());

      ChatSetOptions o = Options();
      o.resume = true;
      auto r = WriteChatSet(input, dir, Encoder(), o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectSameCounts(*r, *ref);
      const SetContents got = Read(dir);
      EXPECT_EQ(got.ids, want.ids);
      EXPECT_EQ(got.masks, want.masks);
    }
  }
}

TEST(ChatSetTest, ResumeRefusesOtherOptionsAndAChangedInput) {
  const std::string input = WriteInput("changed.jsonl");
  const std::string dir = (TestDir() / "changed.tdata").string();
  fs::remove_all(dir);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ChatSetOptions o = Options();
    o.fault = [](std::string_view at, int64_t k) {
      if (at == "shard_recorded" && k == 1) ::raise(SIGKILL);
    };
    (void)WriteChatSet(input, dir, Encoder(), o);
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ChatSetOptions other = Options();
  other.resume = true;
  other.settings[0].value = "/models/b";
  auto r = WriteChatSet(input, dir, Encoder(), other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--model was /models/a, now /models/b"), std::string::npos)
      << r.status().ToString();
  // Settings that change the set's layout rather than its tokens are refused just the same,
  // each named with both values: here the shard bound and the format.
  ChatSetOptions shards = Options();
  shards.resume = true;
  shards.convert.shard_tokens = 800;
  shards.convert.format = chat_data::ChatFormat::kShareGpt;
  r = WriteChatSet(input, dir, Encoder(), shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--shard-tokens was 400, now 800"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("--format was auto, now sharegpt"), std::string::npos)
      << r.status().ToString();
  ChatSetOptions fewer = Options();
  fewer.resume = true;
  fewer.settings.pop_back();
  r = WriteChatSet(input, dir, Encoder(), fewer);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--turns was \"all\", now not given"), std::string::npos)
      << r.status().ToString();

  std::ofstream(input, std::ios::app) << R"({"messages": [{"role": "user", "content": "x"}]})" "\n";
  ChatSetOptions same = Options();
  same.resume = true;
  auto changed = WriteChatSet(input, dir, Encoder(), same);
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.status().message().find("input changed"), std::string::npos)
      << changed.status().ToString();
  // A fresh conversion does not silently throw the unfinished one away.
  auto fresh = WriteChatSet(input, dir, Encoder(), Options());
  ASSERT_FALSE(fresh.ok());
  EXPECT_NE(fresh.status().message().find("--resume"), std::string::npos);
}

TEST(ChatSetTest, AFailedStrictRunOrNoExamplesLeavesNoSetBlockingTheRerun) {
  const std::string input = WriteInput("strict.jsonl");  // a bad line every 17th
  const std::string dir = (TestDir() / "strict.tdata").string();
  fs::remove_all(dir);
  ChatSetOptions strict = Options();
  strict.convert.skip_bad = false;
  auto r = WriteChatSet(input, dir, Encoder(), strict);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--skip-bad"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(fs::exists(dir));
  // The rerun with --skip-bad is a fresh conversion, not refused as an unfinished one.
  auto again = WriteChatSet(input, dir, Encoder(), Options());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_GT(again->examples, 0);

  // An input with no usable line: an error, and no complete set of 0 shards left behind.
  const std::string none = (TestDir() / "none.jsonl").string();
  std::ofstream(none) << R"({"messages": [{"role": "user", "content": "no answer"}]})" "\n";
  const std::string empty_dir = (TestDir() / "none.tdata").string();
  fs::remove_all(empty_dir);
  auto nothing = WriteChatSet(none, empty_dir, Encoder(), Options());
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("no examples to write"), std::string::npos)
      << nothing.status().ToString();
  EXPECT_NE(nothing.status().message().find("none.jsonl:1: "), std::string::npos);
  EXPECT_FALSE(fs::exists(empty_dir));
}

TEST(ChatSetTest, TamperedResumeStateIsDataLossNamingTheField) {
  const std::string input = WriteInput("tamper.jsonl");
  const std::string dir = (TestDir() / "tamper.tdata").string();
  fs::remove_all(dir);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ChatSetOptions o = Options();
    o.fault = [](std::string_view at, int64_t k) {
      if (at == "shard_recorded" && k == 1) ::raise(SIGKILL);
    };
    (void)WriteChatSet(input, dir, Encoder(), o);
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  const std::string manifest = dir + "/shards.json";
  std::string text;
  {
    std::ifstream in(manifest);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Fields of the wrong type threw nlohmann::type_error (rc 134).
  const std::pair<std::string, std::string> edits[] = {
      {"\"version\": 1", "\"version\": \"1\""},
      {"\"format\": \"openai\"", "\"format\": 7"},
      {"\"lines\": ", "\"lines\": -"},
  };
  for (const auto& [from, to] : edits) {
    const size_t at = text.find(from, text.find("\"convert\""));
    ASSERT_NE(at, std::string::npos) << from << " in " << text;
    std::string bad = text;
    bad.replace(at, from.size(), to);
    std::ofstream(manifest, std::ios::trunc) << bad;
    ChatSetOptions o = Options();
    o.resume = true;
    auto r = WriteChatSet(input, dir, Encoder(), o);
    ASSERT_FALSE(r.ok()) << to;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    const std::string field = from.substr(0, from.find(':'));
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace tandem::chat_data
