// Token ids at or above the vocab of the model a source feeds must never
// reach a batch. The vocab comes from the model (SourceTarget) when the job gives none; an
// out-of-vocab id is an error naming the file and line (JSONL) or document (binary set), or
// with skip_bad a counted skip.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "actors/data/source.h"
#include "data/corpus/corpus.h"
#include "data/corpus/data_command.h"
#include "data/corpus/test_util.h"

namespace tandem::data {
namespace {

using testing::ScratchDir;
using testing::WriteText;

ConfigValue Section(std::initializer_list<std::pair<const char*, ConfigValue>> kv) {
  ConfigValue s = ConfigValue::MakeTable();
  s.set_location("job.toml:3");
  for (const auto& [k, v] : kv) s.Set(k, v);
  return s;
}

const SourceTarget kModel{512, "vocab_size of /m/config.json"};

// 12 documents of ids below 512, and line 5 holding 999.
std::string JsonlWithBadLine() {
  std::string text;
  for (int d = 0; d < 12; ++d) {
    text += "{\"input_ids\": [" + std::to_string(d) + ", " +
            std::to_string(d == 4 ? 999 : 100 + d) + ", 7]}\n";
  }
  return text;
}

// Every id of every batch `src` gives until it ends.
std::vector<int32_t> AllIds(BatchSource& src) {
  std::vector<int32_t> ids;
  while (true) {
    auto b = src.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok() || !b->has_value()) break;
    ids.insert(ids.end(), (*b)->input_ids.begin(), (*b)->input_ids.end());
  }
  return ids;
}

TEST(SourceVocabTest, JsonlTakesTheModelsVocabWhenTheJobGivesNone) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl");
  WriteText(jsonl, JsonlWithBadLine());
  auto src = MakeBatchSource(Section({{"data", jsonl}, {"max_tokens", 8}}), 0, 1, 0, kModel);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find(jsonl + ":5: input_ids[1] = 999 is not below vocab "
                                                "512 (vocab_size of /m/config.json)"),
            std::string::npos)
      << src.status().message();

  auto skipped = MakeBatchSource(
      Section({{"data", jsonl}, {"max_tokens", 8}, {"skip_bad", true}}), 0, 1, 0, kModel);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_NE((*skipped)->Describe().find("skipped 1 bad records (id_out_of_range: 1)"),
            std::string::npos)
      << (*skipped)->Describe();
  const std::vector<int32_t> ids = AllIds(**skipped);
  EXPECT_EQ(ids.size(), 33u);  // 11 documents of 3
  for (int32_t id : ids) EXPECT_LT(id, 512);
}

TEST(SourceVocabTest, BinarySetNamesTheDocumentOrSkipsIt) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl"), set = dir.Path("d.bin");
  WriteText(jsonl, JsonlWithBadLine());
  std::ostringstream printed;
  ASSERT_TRUE(RunDataCommand({.input = jsonl, .output = set, .out = &printed}).ok());
  auto src = MakeBatchSource(Section({{"data", set}, {"max_tokens", 8}, {"shuffle", false}}),
                             0, 1, 0, kModel);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find(set + ": document 4, token 1: id 999 is not below "
                                              "vocab 512 (vocab_size of /m/config.json)"),
            std::string::npos)
      << src.status().message();

  auto skipped = MakeBatchSource(
      Section({{"data", set}, {"max_tokens", 8}, {"skip_bad", true}, {"epochs", 2}}), 0, 1, 0,
      kModel);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_NE((*skipped)->Describe().find("vocab 512: skipped 1 bad records (id_out_of_range: 1)"),
            std::string::npos)
      << (*skipped)->Describe();
  const std::vector<int32_t> ids = AllIds(**skipped);
  EXPECT_EQ(ids.size(), 66u);  // 11 documents of 3, twice
  for (int32_t id : ids) EXPECT_LT(id, 512);

  // `tandem data --vocab` names the document too.
  Status st = RunDataCommand({.input = set, .output = {}, .vocab = 512, .out = &printed});
  EXPECT_NE(st.message().find(set + ": document 4, token 1: id 999"), std::string::npos)
      << st.ToString();
}

// A binary set whose header understates its largest id is caught as the batch is built.
TEST(SourceVocabTest, AHeaderThatUnderstatesItsBoundIsDataLoss) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl"), set = dir.Path("d.bin");
  WriteText(jsonl, JsonlWithBadLine());
  std::ostringstream printed;
  ASSERT_TRUE(RunDataCommand({.input = jsonl, .output = set, .out = &printed}).ok());
  {
    std::fstream f(set + "/header", std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t lie = 200;
    f.seekp(32);  // vocab_bound (docs/data-format.md)
    f.write(reinterpret_cast<const char*>(&lie), 4);
  }
  auto src = MakeBatchSource(
      Section({{"data", set}, {"max_tokens", 64}, {"shuffle", false}}), 0, 1, 0, kModel);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto batch = (*src)->Next();
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(batch.status().message().find("document 4, token 1: id 999"), std::string::npos)
      << batch.status().ToString();
}

TEST(SourceVocabTest, TheJobsVocabMayNotExceedTheModels) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl");
  WriteText(jsonl, "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 5, 300]}\n");
  auto above = MakeBatchSource(Section({{"data", jsonl}, {"vocab", 1000}}), 0, 1, 0, kModel);
  ASSERT_FALSE(above.ok());
  EXPECT_NE(above.status().message().find("job.toml:3: key 'vocab': 1000 is above the model's "
                                          "vocab_size 512"),
            std::string::npos)
      << above.status().message();
  // A smaller vocab than the model's is the stricter bound and is kept.
  auto below = MakeBatchSource(Section({{"data", jsonl}, {"vocab", 100}, {"max_tokens", 4}}), 0,
                               1, 0, kModel);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.status().message().find(":2: input_ids[2] = 300 is not below vocab 100"),
            std::string::npos)
      << below.status().message();
  // Synthetic data draws from the model's vocabulary when the job gives none.
  auto synthetic = MakeBatchSource(Section({{"data", "synthetic"}, {"max_tokens", 64}}), 0, 1, 0,
                                   SourceTarget{40, "vocab_size of x"});
  ASSERT_TRUE(synthetic.ok()) << synthetic.status().ToString();
  EXPECT_NE((*synthetic)->Describe().find("vocab 40"), std::string::npos)
      << (*synthetic)->Describe();
}

// Found by data_set_fuzz: a binary set may hold any uint32 id; without a vocab one at or
// above 2^31 came out of the packer as a negative int32 id.
TEST(SourceVocabTest, IdsThatDoNotFitInt32AreRefusedWithoutAVocab) {
  ScratchDir dir;
  const std::string set = dir.Path("d.bin");
  ASSERT_TRUE(WriteBinary(Corpus::FromVectors({1, 2, 3, 4, 0xfffffffbu, 6}, {0, 3, 6}, {}, "mem"),
                          set)
                  .ok());
  auto src = MakeBatchSource(Section({{"data", set}, {"max_tokens", 8}, {"shuffle", false}}), 0,
                             1, 0);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find(set + ": document 1, token 1: id 4294967291 is not "
                                              "below vocab 2147483648 (token ids are int32)"),
            std::string::npos)
      << src.status().message();
  auto skipped = MakeBatchSource(
      Section({{"data", set}, {"max_tokens", 8}, {"skip_bad", true}}), 0, 1, 0);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(AllIds(**skipped), (std::vector<int32_t>{1, 2, 3}));
}

}  // namespace
}  // namespace tandem::data
