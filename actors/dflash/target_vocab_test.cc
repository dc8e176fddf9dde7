// End to end: a dflash.target reading a file passes its model's vocab_size
// to the data layer, so ids at or above it are an error naming the file and line (or, with
// skip_bad, a counted skip) instead of training silently to a loss of 0.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "actors/dflash/job_test_util.h"

namespace tandem::dflash {
namespace {

// 40 documents of 64 ids below 128 (the tiny target's vocab_size); line 7 holds id 200.
std::string WriteJsonl(const std::string& dir) {
  const std::string path = dir + "/train.jsonl";
  std::ofstream f(path);
  for (int d = 0; d < 40; ++d) {
    std::string ids;
    for (int t = 0; t < 64; ++t) {
      const int id = d == 6 && t == 3 ? 200 : (d * 7 + t * 3) % 128;
      ids += fmt::format("{}{}", t ? ", " : "", id);
    }
    f << "{\"input_ids\": [" << ids << "]}\n";
  }
  return path;
}

Result<JobReport> RunWithData(const std::string& dir, const std::string& data,
                              const std::string& extra) {
  return testing::RunJob({.name = "vocab-test",
                          .max_steps = 5,
                          .checkpoint_dir = dir,
                          .target_extra = fmt::format("data = \"{}\"\n{}", data, extra)});
}

TEST(TargetVocabTest, OutOfVocabIdsFailTheJobOrAreSkipped) {
  const std::string dir = testing::FreshDir("target_vocab");
  const std::string data = WriteJsonl(dir);
  auto failed = RunWithData(dir + "/ck", data, "");
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_FALSE(failed->status.ok()) << failed->ToString();
  EXPECT_NE(failed->ToString().find(data + ":7: input_ids[3] = 200 is not below vocab 128 "
                                           "(vocab_size of the target's target_config)"),
            std::string::npos)
      << failed->ToString();

  auto skipped = RunWithData(dir + "/ck2", data, "skip_bad = true\n");
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  ASSERT_TRUE(skipped->status.ok()) << skipped->ToString();
  EXPECT_NE(skipped->actors[0].summary.find("skipped 1 bad records (id_out_of_range: 1)"),
            std::string::npos)
      << skipped->ToString();
}

}  // namespace
}  // namespace tandem::dflash
