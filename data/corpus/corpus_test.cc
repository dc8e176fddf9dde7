#include "data/corpus/corpus.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "data/corpus/test_util.h"

namespace tandem::data {
namespace {

using testing::ScratchDir;
using testing::WriteText;

std::vector<uint32_t> Ids(const Document& d) { return {d.ids.begin(), d.ids.end()}; }
std::vector<uint8_t> Mask(const Document& d) { return {d.mask.begin(), d.mask.end()}; }

TEST(JsonlTest, ReadsDocumentsAndMasks) {
  ScratchDir dir;
  const std::string path = dir.Path("a.jsonl");
  WriteText(path,
            "{\"input_ids\": [5, 6, 7], \"loss_mask\": [0, 1, 1]}\n"
            "\n"
            "{\"input_ids\": [9], \"loss_mask\": [true], \"text\": \"ignored\"}\n");
  auto c = ReadJsonl(path, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->documents(), 2);
  EXPECT_EQ(c->tokens(), 4);
  EXPECT_TRUE(c->has_mask());
  EXPECT_EQ(c->vocab_bound(), 10u);
  EXPECT_EQ(Ids(c->doc(0)), (std::vector<uint32_t>{5, 6, 7}));
  EXPECT_EQ(Mask(c->doc(0)), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(Ids(c->doc(1)), (std::vector<uint32_t>{9}));
  EXPECT_EQ(c->skips().blank_lines, 1);
  EXPECT_EQ(c->skips().skipped, 0);
}

struct BadCase {
  const char* line;
  const char* reason;
  const char* message_part;
};

class JsonlBadRecordTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(JsonlBadRecordTest, ErrorNamesFileAndLine) {
  ScratchDir dir;
  const std::string path = dir.Path("bad.jsonl");
  WriteText(path, std::string("{\"input_ids\": [1, 2]}\n{\"input_ids\": [3]}\n") +
                      GetParam().line + "\n{\"input_ids\": [4, 5]}\n");
  auto c = ReadJsonl(path, {.vocab = 100});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(path + ":3: "), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(GetParam().message_part), std::string::npos)
      << c.status().message();

  auto skipped = ReadJsonl(path, {.vocab = 100, .skip_bad = true});
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(skipped->documents(), 3);
  EXPECT_EQ(skipped->tokens(), 5);
  EXPECT_EQ(skipped->skips().skipped, 1);
  EXPECT_EQ(skipped->skips().by_reason.at(GetParam().reason), 1);
  ASSERT_EQ(skipped->skips().examples.size(), 1u);
  EXPECT_NE(skipped->skips().examples[0].find(path + ":3: "), std::string::npos);
  EXPECT_NE(skipped->skips().ToString().find(GetParam().reason), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    AllReasons, JsonlBadRecordTest,
    ::testing::Values(
        BadCase{"{\"input_ids\": [1, 2", "not_json", "not valid JSON"},
        BadCase{"[1, 2]", "not_object", "expected a JSON object"},
        BadCase{"{\"ids\": [1, 2]}", "missing_input_ids", "no \"input_ids\""},
        BadCase{"{\"input_ids\": \"1 2\"}", "bad_input_ids", "must be an array"},
        BadCase{"{\"input_ids\": []}", "empty", "is empty"},
        BadCase{"{\"input_ids\": [1, 2.5]}", "bad_id", "input_ids[1] = 2.5 is not an integer"},
        BadCase{"{\"input_ids\": [1, \"2\"]}", "bad_id", "is not an integer"},
        BadCase{"{\"input_ids\": [-1]}", "id_out_of_range", "input_ids[0] = -1 is negative"},
        BadCase{"{\"input_ids\": [7, 100]}", "id_out_of_range", "= 100 is not below vocab 100"},
        BadCase{"{\"input_ids\": [1, 2], \"loss_mask\": [1]}", "mask_length",
                "\"loss_mask\" has 1 entries"},
        BadCase{"{\"input_ids\": [1, 2], \"loss_mask\": [1, 2]}", "bad_loss_mask",
                "loss_mask[1] = 2 is not 0 or 1"}));

TEST(JsonlTest, DeeplyNestedRecordIsACountedSkipNotACrash) {
  // 50,000 levels inside input_ids: printing the bad id for the message recursed once per
  // level and overflowed the stack.
  ScratchDir dir;
  const std::string path = dir.Path("deep.jsonl");
  WriteText(path, "{\"input_ids\": [1, 2]}\n{\"input_ids\": [3, " + std::string(50000, '[') +
                      std::string(50000, ']') + "]}\n{\"input_ids\": [4]}\n");
  auto c = ReadJsonl(path, {.vocab = 100});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(path + ":2: not valid JSON: line 1, byte "),
            std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("JSON nested deeper than 128 levels"),
            std::string::npos)
      << c.status().message();
  auto skipped = ReadJsonl(path, {.vocab = 100, .skip_bad = true});
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(skipped->documents(), 2);
  EXPECT_EQ(skipped->skips().by_reason.at("not_json"), 1);
}

TEST(JsonlTest, MixedMaskPresenceIsAnError) {
  ScratchDir dir;
  const std::string path = dir.Path("mixed.jsonl");
  WriteText(path, "{\"input_ids\": [1, 2]}\n{\"input_ids\": [3], \"loss_mask\": [1]}\n");
  auto c = ReadJsonl(path, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(":2: has a \"loss_mask\" but line 1 has none"),
            std::string::npos)
      << c.status().message();
}

TEST(JsonlTest, WithoutVocabIdsMustFitInt32) {
  ScratchDir dir;
  const std::string path = dir.Path("big.jsonl");
  WriteText(path, "{\"input_ids\": [2147483647]}\n{\"input_ids\": [2147483648]}\n");
  auto c = ReadJsonl(path, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(":2: input_ids[0] = 2147483648 does not fit int32"),
            std::string::npos)
      << c.status().message();
}

TEST(JsonlTest, NothingUsableIsAnErrorThatCountsSkips) {
  ScratchDir dir;
  const std::string path = dir.Path("none.jsonl");
  WriteText(path, "oops\n{\"input_ids\": []}\n");
  auto c = ReadJsonl(path, {.skip_bad = true});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("skipped 2 bad records"), std::string::npos)
      << c.status().message();
  EXPECT_EQ(ReadJsonl(dir.Path("missing.jsonl"), {}).status().code(), StatusCode::kNotFound);
}

TEST(JsonlTest, ChatOrTextRecordsSayHowToConvertThem) {
  ScratchDir dir;
  const std::string path = dir.Path("chat.jsonl");
  WriteText(path, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  auto c = ReadJsonl(path, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("chat.jsonl:1: no \"input_ids\" key; this is a chat "
                                      "record (\"messages\"): convert chat JSONL to token ids "
                                      "first with `tandem data FILE --model MODEL_DIR"),
            std::string::npos)
      << c.status().message();
  WriteText(path, "{\"text\": \"hello\"}\n");
  c = ReadJsonl(path, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("raw \"text\" is not read"), std::string::npos)
      << c.status().message();
}

Corpus SmallCorpus(bool with_mask) {
  std::vector<uint32_t> tokens = {1, 2, 3, 40, 5, 6, 7, 8};
  std::vector<uint64_t> offsets = {0, 3, 4, 8};
  std::vector<uint8_t> mask;
  if (with_mask) mask = {0, 1, 1, 1, 0, 0, 1, 1};
  return Corpus::FromVectors(tokens, offsets, mask, "memory");
}

TEST(BinaryTest, RoundTripWithAndWithoutMask) {
  for (bool with_mask : {false, true}) {
    ScratchDir dir;
    const std::string set = dir.Path("set");
    Corpus c = SmallCorpus(with_mask);
    ASSERT_TRUE(WriteBinary(c, set).ok());
    EXPECT_TRUE(IsBinarySet(set));
    auto m = OpenBinary(set, BinaryCheck::kFull);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->documents(), 3);
    EXPECT_EQ(m->tokens(), 8);
    EXPECT_EQ(m->has_mask(), with_mask);
    EXPECT_EQ(m->vocab_bound(), 41u);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(Ids(m->doc(i)), Ids(c.doc(i)));
      EXPECT_EQ(Mask(m->doc(i)), Mask(c.doc(i)));
    }
    // Rewriting without a mask removes the stale mask file.
    ASSERT_TRUE(WriteBinary(SmallCorpus(false), set).ok());
    EXPECT_FALSE(std::filesystem::exists(dir.Path("set/loss_mask.u8")));
  }
}

// Overwrites `bytes` at `offset` of `path`.
void Patch(const std::string& path, size_t offset, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string U64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

struct Corruption {
  const char* name;
  void (*apply)(const std::string& set);
  const char* file;
  const char* message_part;
  BinaryCheck check;
};

class BinaryCorruptionTest : public ::testing::TestWithParam<Corruption> {};

TEST_P(BinaryCorruptionTest, IsDataLossNamingTheFile) {
  ScratchDir dir;
  const std::string set = dir.Path("set");
  ASSERT_TRUE(WriteBinary(SmallCorpus(true), set).ok());
  GetParam().apply(set);
  auto m = OpenBinary(set, GetParam().check);
  ASSERT_FALSE(m.ok()) << GetParam().name;
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss) << m.status().ToString();
  EXPECT_NE(m.status().message().find(set + "/" + GetParam().file), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find(GetParam().message_part), std::string::npos)
      << m.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, BinaryCorruptionTest,
    ::testing::Values(
        Corruption{"magic", [](const std::string& s) { Patch(s + "/header", 0, "X"); },
                   "header", "bad magic", BinaryCheck::kStructure},
        Corruption{"version", [](const std::string& s) { Patch(s + "/header", 8, "\x07"); },
                   "header", "format version 7", BinaryCheck::kStructure},
        Corruption{"short header",
                   [](const std::string& s) { std::filesystem::resize_file(s + "/header", 10); },
                   "header", "header is 10 bytes", BinaryCheck::kStructure},
        Corruption{"truncated tokens",
                   [](const std::string& s) {
                     std::filesystem::resize_file(s + "/tokens.u32", 28);
                   },
                   "tokens.u32", "header says 8 tokens", BinaryCheck::kStructure},
        Corruption{"extra offsets",
                   [](const std::string& s) {
                     std::filesystem::resize_file(s + "/offsets.u64", 40);
                   },
                   "offsets.u64", "header says 3 documents", BinaryCheck::kStructure},
        Corruption{"short mask",
                   [](const std::string& s) {
                     std::filesystem::resize_file(s + "/loss_mask.u8", 7);
                   },
                   "loss_mask.u8", "header says 8 tokens", BinaryCheck::kStructure},
        Corruption{"offsets backwards",
                   [](const std::string& s) { Patch(s + "/offsets.u64", 16, U64(2)); },
                   "offsets.u64", "document 1 is empty or offsets go backwards",
                   BinaryCheck::kStructure},
        Corruption{"offset past end",
                   [](const std::string& s) { Patch(s + "/offsets.u64", 16, U64(9)); },
                   "offsets.u64", "past the 8 tokens", BinaryCheck::kStructure},
        Corruption{"first offset",
                   [](const std::string& s) { Patch(s + "/offsets.u64", 0, U64(1)); },
                   "offsets.u64", "first offset is 1", BinaryCheck::kStructure},
        Corruption{"token above vocab",
                   [](const std::string& s) { Patch(s + "/tokens.u32", 4, "\xff"); },
                   "tokens.u32", "token 1 is 255", BinaryCheck::kFull},
        Corruption{"mask byte",
                   [](const std::string& s) { Patch(s + "/loss_mask.u8", 3, "\x02"); },
                   "loss_mask.u8", "byte 3 is 2", BinaryCheck::kFull},
        // (2^61 + 511 + 1) * 8 wraps to 4096, the size of this offsets file;
        // the set must be refused, never read past the 4 KB mapping.
        Corruption{"documents overflow",
                   [](const std::string& s) {
                     std::filesystem::resize_file(s + "/offsets.u64", 4096);
                     Patch(s + "/header", 16, U64((uint64_t{1} << 61) + 511));
                   },
                   "offsets.u64", "header says 2305843009213694463 documents (offsets need more bytes than 2^64)",
                   BinaryCheck::kStructure},
        Corruption{"tokens overflow",
                   [](const std::string& s) {
                     std::filesystem::resize_file(s + "/tokens.u32", 4096);
                     Patch(s + "/header", 24, U64((uint64_t{1} << 62) + 1024));
                   },
                   "tokens.u32", "more bytes than 2^64", BinaryCheck::kStructure},
        Corruption{"tokens not a file",
                   [](const std::string& s) {
                     std::filesystem::remove(s + "/tokens.u32");
                     std::filesystem::create_directory(s + "/tokens.u32");
                   },
                   "tokens.u32", "not a regular file", BinaryCheck::kStructure},
        Corruption{"missing mask",
                   [](const std::string& s) { std::filesystem::remove(s + "/loss_mask.u8"); },
                   "loss_mask.u8", "missing, but the set's header lists it", BinaryCheck::kStructure}),
    [](const ::testing::TestParamInfo<Corruption>& info) {
      std::string n = info.param.name;
      for (char& ch : n) if (ch == ' ') ch = '_';
      return n;
    });

}  // namespace
}  // namespace tandem::data
