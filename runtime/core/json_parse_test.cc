#include "runtime/core/json_parse.h"

#include <string>

#include <gtest/gtest.h>

namespace tandem {
namespace {

std::string Nested(int depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

TEST(JsonParseTest, RefusesDeepNestingWithoutCrashing) {
  // 50,000 levels: parsing it unbounded and then copying or dumping the value overflows the
  // stack.
  const std::string text = "{\"a\":\n" + Nested(50000) + "}";
  Result<nlohmann::json> j = ParseJson(text, "deep.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = j.status().message();
  EXPECT_NE(m.find("deep.json"), std::string::npos) << m;
  EXPECT_NE(m.find("line 2"), std::string::npos) << m;
  // 1-based: `{"a":` and a newline (6 bytes), then 127 brackets reach the limit.
  EXPECT_NE(m.find("byte 134"), std::string::npos) << m;
  EXPECT_NE(m.find("deeper than 128"), std::string::npos) << m;
  EXPECT_FALSE(ParseOrderedJson(text, "deep.json").ok());
}

TEST(JsonParseTest, AcceptsTheLimitAndRefusesOneMore) {
  Result<nlohmann::json> at = ParseJson(Nested(kMaxJsonDepth), "x");
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  nlohmann::json copy = *at;  // copies recurse per level: bounded now
  EXPECT_EQ(copy, *at);
  EXPECT_FALSE(ParseJson(Nested(kMaxJsonDepth + 1), "x").ok());
  EXPECT_TRUE(ParseJson(Nested(5), "x", /*max_depth=*/5).ok());
  EXPECT_FALSE(ParseJson(Nested(6), "x", /*max_depth=*/5).ok());
}

TEST(JsonParseTest, BracketsInsideStringsDoNotCount) {
  const std::string s = "\"" + std::string(1000, '[') + "\\\"{{{\"";
  Result<nlohmann::json> j = ParseJson("[" + s + "]", "x");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)[0].get<std::string>().size(), 1004u);
}

TEST(JsonParseTest, MalformedTextNamesWhatAndLine) {
  Result<nlohmann::json> j = ParseJson("{\n\"a\": 1,\n\"b\": tru }", "cfg.json");
  ASSERT_FALSE(j.ok());
  const std::string& m = j.status().message();
  EXPECT_NE(m.find("cfg.json: line 3"), std::string::npos) << m;
  EXPECT_NE(m.find("malformed JSON"), std::string::npos) << m;
  EXPECT_FALSE(ParseJson("", "empty").ok());
  EXPECT_FALSE(ParseJson("[1] [2]", "two").ok());
  EXPECT_FALSE(ParseJson("\"\xff\"", "utf8").ok());
}

// nlohmann quotes what it read last byte by byte, so a non-ASCII character where a value
// belongs left half of its UTF-8 sequence in the message, which then made any JSON holding
// the message throw when dumped (found by fuzz/chat_set_fuzz.cc: a chat conversion's resume
// state keeps bad lines' messages). Such bytes are written as \xNN.
TEST(JsonParseTest, MalformedTextMessagesAreValidUtf8) {
  for (const char* text : {"{\"role\": \xde\x8aser\"}", "[\xc3\xa9]", "{\"a\": 1,\xe6\x97\xa5}"}) {
    Result<nlohmann::ordered_json> j = ParseOrderedJson(text, "line");
    ASSERT_FALSE(j.ok()) << text;
    const std::string& m = j.status().message();
    EXPECT_NO_THROW((void)nlohmann::json(m).dump()) << m;
    for (char c : m) EXPECT_LT(static_cast<unsigned char>(c), 0x80) << m;
  }
  Result<nlohmann::json> j = ParseJson("{\"role\": \xde\x8aser\"}", "line");
  EXPECT_NE(j.status().message().find("\\xDE"), std::string::npos) << j.status().message();
}

TEST(JsonParseTest, OrderedKeepsTheTextsOrder) {
  Result<nlohmann::ordered_json> j = ParseOrderedJson(R"({"z": 1, "a": 2})", "x");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->begin().key(), "z");
}

TEST(JsonParseTest, ReadJsonFileNamesTheFile) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  Result<nlohmann::json> missing = ReadJsonFile(dir + "/no-such.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no-such.json"), std::string::npos);
}

TEST(JsonParseTest, DescribeCutsLongValues) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 1000000; ++i) big.push_back(i);
  const std::string d = DescribeJson(big, 50);
  EXPECT_LT(d.size(), 100u) << d;
  EXPECT_EQ(d.rfind("[0,1,2,", 0), 0u) << d;
  EXPECT_NE(d.find("an array of 1000000 elements"), std::string::npos) << d;

  const std::string s = DescribeJson(nlohmann::json(std::string(1 << 20, 'x')), 40);
  EXPECT_LT(s.size(), 100u) << s;
  EXPECT_NE(s.find("a string of 1048576 bytes"), std::string::npos) << s;

  EXPECT_EQ(DescribeJson(nlohmann::json::parse(R"({"a":[1,"b"]})")), R"({"a":[1,"b"]})");
  EXPECT_EQ(DescribeJson(nlohmann::json(2.5)), "2.5");
  // A cut never splits a UTF-8 sequence.
  std::string accents;
  for (int i = 0; i < 50; ++i) accents += "\xc3\xa9";
  const std::string a = DescribeJson(nlohmann::json(accents), 10);
  EXPECT_NO_THROW((void)nlohmann::json(a).dump()) << a;
}

}  // namespace
}  // namespace tandem
