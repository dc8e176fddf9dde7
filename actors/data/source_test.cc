#include "actors/data/source.h"

#include <sstream>

#include <gtest/gtest.h>

#include "data/corpus/data_command.h"
#include "data/corpus/test_util.h"

namespace tandem::data {
namespace {

using testing::ScratchDir;
using testing::Sums;
using testing::WriteText;

ConfigValue Section(std::initializer_list<std::pair<const char*, ConfigValue>> kv) {
  ConfigValue s = ConfigValue::MakeTable();
  s.set_location("job.toml:7");
  for (const auto& [k, v] : kv) s.Set(k, v);
  return s;
}

TEST(MakeBatchSourceTest, SyntheticFromKeys) {
  auto src = MakeBatchSource(
      Section({{"data", "synthetic"}, {"max_tokens", 128}, {"vocab", 50},
               {"doc_len", ConfigValue::Array{8, 16}}, {"batches_per_epoch", 4}}),
      0, 1, 3);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(Sums(**src).size(), 4u);  // default epochs = 1
  EXPECT_NE((*src)->Describe().find("vocab 50, doc_len [8, 16]"), std::string::npos)
      << (*src)->Describe();
}

TEST(MakeBatchSourceTest, JsonlAndBinaryGiveTheSameBatches) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl");
  std::string text;
  for (int d = 0; d < 30; ++d) {
    text += "{\"input_ids\": [";
    for (int t = 0; t <= d % 7; ++t) text += (t ? ", " : "") + std::to_string(d + t);
    text += "]}\n";
  }
  WriteText(jsonl, text + "not json\n");
  std::ostringstream printed;
  ASSERT_TRUE(RunDataCommand({.input = jsonl, .output = dir.Path("d.bin"), .skip_bad = true,
                              .out = &printed})
                  .ok());
  EXPECT_NE(printed.str().find("30 documents, 115 tokens"), std::string::npos) << printed.str();
  EXPECT_NE(printed.str().find("skipped 1 bad records (not_json: 1)"), std::string::npos);
  EXPECT_NE(printed.str().find(jsonl + ":31: not valid JSON"), std::string::npos);
  EXPECT_NE(printed.str().find("wrote " + dir.Path("d.bin")), std::string::npos);
  std::ostringstream validated;
  ASSERT_TRUE(RunDataCommand({.input = dir.Path("d.bin"), .output = {}, .vocab = 40, .out = &validated}).ok());
  EXPECT_NE(validated.str().find("document length: min 1, mean 3.8, max 7"), std::string::npos)
      << validated.str();
  EXPECT_FALSE(RunDataCommand({.input = dir.Path("d.bin"), .output = {}, .vocab = 30, .out = &validated}).ok());

  auto from_json = MakeBatchSource(
      Section({{"data", jsonl}, {"max_tokens", 16}, {"skip_bad", true}, {"epochs", 2}}), 1, 2,
      9);
  auto from_bin = MakeBatchSource(
      Section({{"data", dir.Path("d.bin")}, {"max_tokens", 16}, {"epochs", 2}}), 1, 2, 9);
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  ASSERT_TRUE(from_bin.ok()) << from_bin.status().ToString();
  const auto sums = Sums(**from_json);
  EXPECT_GT(sums.size(), 4u);
  EXPECT_EQ(sums, Sums(**from_bin));
  EXPECT_NE((*from_json)->Describe().find("skipped 1 bad records"), std::string::npos);
}

TEST(MakeBatchSourceTest, ErrorsNameKeyAndLocation) {
  ScratchDir dir;
  const std::string jsonl = dir.Path("d.jsonl");
  WriteText(jsonl, "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [1, 2, 300]}\n");
  struct Case {
    ConfigValue section;
    const char* part;
  };
  std::vector<Case> cases = {
      {Section({{"max_tokens", 8}}), "missing required key 'data'"},
      {Section({{"data", "synthetic"}, {"max_tokens", 0}}),
       "job.toml:7: key 'max_tokens': must be positive, got 0"},
      {Section({{"data", "synthetic"}, {"epochs", -2}}), "job.toml:7: key 'epochs'"},
      {Section({{"data", "synthetic"}, {"doc_len", "long"}}), "job.toml:7: key 'doc_len'"},
      {Section({{"data", "synthetic"}, {"doc_len", 4096}}), "job.toml:7: key 'data'"},
      {Section({{"data", jsonl}, {"shuffle", "yes"}}), "key 'shuffle'"},
      {Section({{"data", jsonl}, {"long_documents", "drop"}}), "key 'long_documents'"},
      {Section({{"data", dir.Path("nope.jsonl")}}), "job.toml:7: key 'data': '"},
      {Section({{"data", jsonl}, {"vocab", 100}}), ":2: input_ids[2] = 300 is not below vocab"},
      {Section({{"data", dir.Path(".")}}), "not a binary data set"},
  };
  for (const Case& c : cases) {
    auto src = MakeBatchSource(c.section, 0, 1, 0);
    ASSERT_FALSE(src.ok()) << c.section.ToString();
    EXPECT_NE(src.status().message().find(c.part), std::string::npos)
        << src.status().message() << " should contain " << c.part;
  }
}

}  // namespace
}  // namespace tandem::data
