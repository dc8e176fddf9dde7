// DrafterMetricsLog's selector numbers: recall and accuracy from the drafter's counts, none
// for a DFlash drafter, and the log line and train record carry them only for DFlash2.
#include "actors/dflash/drafter_metrics.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/scratch_dir.h"

namespace tandem::dflash {
namespace {

StepMetrics DFlash2Step(float sel_loss, int32_t covered, int32_t correct, int64_t loss_rows) {
  StepMetrics m;
  m.loss = 2.0f;
  m.correct = {0, 1, 1, 0};
  m.has_selector = true;
  m.selector_loss = sel_loss;
  m.selector_stats[0] = covered;
  m.selector_stats[1] = correct;
  m.loss_rows = loss_rows;
  return m;
}

TEST(DrafterMetricsTest, SelectorOfDividesTheCounts) {
  const SelectorMetrics s = SelectorOf(DFlash2Step(1.5f, 6, 3, 8));
  EXPECT_TRUE(s.active);
  EXPECT_DOUBLE_EQ(s.loss, 1.5);
  EXPECT_DOUBLE_EQ(s.recall, 0.75);   // 6 of 8 loss rows have their target as a candidate
  EXPECT_DOUBLE_EQ(s.accuracy, 0.5);  // 3 of those 6 ranked first
  // No loss row, nothing covered: zeros, not NaN.
  const SelectorMetrics empty = SelectorOf(DFlash2Step(0.0f, 0, 0, 0));
  EXPECT_TRUE(empty.active);
  EXPECT_DOUBLE_EQ(empty.recall, 0.0);
  EXPECT_DOUBLE_EQ(empty.accuracy, 0.0);
  StepMetrics dflash;
  dflash.correct = {1, 0};
  EXPECT_FALSE(SelectorOf(dflash).active);
}

TEST(DrafterMetricsTest, LogLineAndTrainRecordCarryTheSelectorOnlyForDFlash2) {
  const testing::ScratchDir scratch;
  const std::string path = scratch.File("metrics.jsonl");
  JobMetrics metrics(nullptr, SteadyClock::now());
  ASSERT_TRUE(metrics.OpenFile(path, /*append=*/false).ok());
  DrafterMetricsLog log(&metrics, "drafter/0", /*block_size=*/4, /*total_steps=*/10);
  StepMetrics dflash;
  dflash.correct = {0, 1, 1, 0};
  const std::string a = log.Log(1, dflash, 1e-3, 100.0);
  EXPECT_EQ(a.find("sel_loss"), std::string::npos) << a;
  const std::string b = log.Log(2, DFlash2Step(1.5f, 6, 3, 8), 1e-3, 100.0);
  const nlohmann::json line = nlohmann::json::parse(b);
  EXPECT_DOUBLE_EQ(line["sel_loss"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(line["cand_recall"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(line["sel_acc"].get<double>(), 0.5);
  std::ifstream f(path);
  std::vector<nlohmann::json> records;
  for (std::string l; std::getline(f, l);) records.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(records.size(), 3u);  // header, two train records
  EXPECT_FALSE(records[1].contains("cand_recall"));
  EXPECT_DOUBLE_EQ(records[2]["cand_recall"].get<double>(), 0.75);
  EXPECT_TRUE(metrics.Training().selector.active);
}

}  // namespace
}  // namespace tandem::dflash
