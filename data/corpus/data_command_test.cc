// LoadCorpus (any input format) and RunDataCommand (`tandem data` for pre-tokenized input):
// conversion, counts, validation against --vocab, and the inputs it refuses.
#include "data/corpus/data_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "data/corpus/test_util.h"

namespace tandem::data {
namespace {

using testing::ScratchDir;
using testing::WriteText;

// 30 documents of 1 to 7 ids (115 tokens, ids below 36) and, on line 31, a record that is not
// JSON.
std::string JsonlWithOneBadRecord() {
  std::string text;
  for (int d = 0; d < 30; ++d) {
    text += "{\"input_ids\": [";
    for (int t = 0; t <= d % 7; ++t) text += (t ? ", " : "") + std::to_string(d + t);
    text += "]}\n";
  }
  return text + "not json\n";
}

TEST(DataCommandTest, ConvertsJsonlAndValidatesTheSet) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl"), set = dir.Path("d.bin");
  WriteText(jsonl, JsonlWithOneBadRecord());
  std::ostringstream printed;
  ASSERT_TRUE(
      RunDataCommand({.input = jsonl, .output = set, .skip_bad = true, .out = &printed}).ok());
  EXPECT_NE(printed.str().find("30 documents, 115 tokens"), std::string::npos) << printed.str();
  EXPECT_NE(printed.str().find("skipped 1 bad records (not_json: 1)"), std::string::npos);
  EXPECT_NE(printed.str().find(jsonl + ":31: not valid JSON"), std::string::npos);
  EXPECT_NE(printed.str().find("wrote " + set), std::string::npos);

  std::ostringstream validated;
  ASSERT_TRUE(RunDataCommand({.input = set, .output = {}, .vocab = 40, .out = &validated}).ok());
  EXPECT_NE(validated.str().find("document length: min 1, mean 3.8, max 7"), std::string::npos)
      << validated.str();
  // Document 26 holds ids 26..31: the first not below 30.
  Status st = RunDataCommand({.input = set, .output = {}, .vocab = 30, .out = &validated});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(set + ": document 26, token 4: id 30"), std::string::npos)
      << st.ToString();

  // Without skip_bad the bad record is an error naming its line.
  st = RunDataCommand({.input = jsonl, .output = {}, .out = &validated});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(jsonl + ":31"), std::string::npos) << st.ToString();
}

TEST(DataCommandTest, RefusesBadUsage) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl"), set = dir.Path("d.bin");
  WriteText(jsonl, "{\"input_ids\": [1, 2, 3]}\n");
  std::ostringstream printed;
  EXPECT_FALSE(RunDataCommand({.input = {}, .out = &printed}).ok());
  EXPECT_FALSE(RunDataCommand({.input = jsonl, .vocab = -1, .out = &printed}).ok());
  ASSERT_TRUE(RunDataCommand({.input = jsonl, .output = set, .out = &printed}).ok());
  Status again = RunDataCommand({.input = set, .output = dir.Path("e.bin"), .out = &printed});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("is already a binary set"), std::string::npos)
      << again.ToString();
}

TEST(DataCommandTest, RefusesAnOutputDirectoryHoldingNoDataSet) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl"), out = dir.Path("mine");
  WriteText(jsonl, "{\"input_ids\": [1, 2, 3]}\n");
  std::filesystem::create_directories(out);
  WriteText(out + "/header", "not a data set header");
  std::ostringstream printed;
  Status st = RunDataCommand({.input = jsonl, .output = out, .out = &printed});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(out + ": is not empty and holds no tandem data set"),
            std::string::npos)
      << st.ToString();
  std::ifstream kept(out + "/header");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "not a data set header");
  // A set written before is replaced.
  const std::string set = dir.Path("d.bin");
  ASSERT_TRUE(RunDataCommand({.input = jsonl, .output = set, .out = &printed}).ok());
  EXPECT_TRUE(RunDataCommand({.input = jsonl, .output = set, .out = &printed}).ok());
}

TEST(LoadCorpusTest, JsonlAndBinarySetHoldTheSameDocuments) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl"), set = dir.Path("d.bin");
  WriteText(jsonl, JsonlWithOneBadRecord());
  std::ostringstream printed;
  ASSERT_TRUE(
      RunDataCommand({.input = jsonl, .output = set, .skip_bad = true, .out = &printed}).ok());
  auto from_json = LoadCorpus(jsonl, {.skip_bad = true});
  auto from_bin = LoadCorpus(set, {.check = BinaryCheck::kFull});
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  ASSERT_TRUE(from_bin.ok()) << from_bin.status().ToString();
  ASSERT_EQ(from_json->documents(), 30);
  ASSERT_EQ(from_bin->documents(), 30);
  for (int64_t d = 0; d < 30; ++d) {
    const auto a = from_json->doc(d).ids, b = from_bin->doc(d).ids;
    EXPECT_EQ(std::vector<uint32_t>(a.begin(), a.end()), std::vector<uint32_t>(b.begin(), b.end()))
        << "document " << d;
  }

  // A JSONL id not below `vocab` names the line and the origin of the bound: document 26
  // (line 27) holds ids 26..31.
  auto bounded = LoadCorpus(jsonl, {.vocab = 30, .vocab_origin = "the model's"});
  ASSERT_FALSE(bounded.ok());
  EXPECT_NE(bounded.status().message().find(jsonl + ":27: input_ids[4] = 30 is not below vocab 30 "
                                            "(the model's)"),
            std::string::npos)
      << bounded.status().ToString();

  auto not_a_set = LoadCorpus(dir.Path(""), {});
  ASSERT_FALSE(not_a_set.ok());
  EXPECT_NE(not_a_set.status().message().find("is not a binary data set"), std::string::npos)
      << not_a_set.status().ToString();
}

}  // namespace
}  // namespace tandem::data
