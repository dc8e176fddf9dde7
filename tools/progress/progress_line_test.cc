// The progress line: what it shows for a training job and for a job kind with no total,
// and that it fits the width it is given, keeping the most important fields longest.
#include "tools/progress/progress_line.h"

#include <gtest/gtest.h>

namespace tandem::cli {
namespace {

JobStatus Training() {
  JobStatus j;
  j.name = "tiny";
  j.state = "running";
  j.seconds = 30;
  j.verdict = "consumers wait on producers: 81% of consumer time blocked popping 'hidden'";
  TrainingStatus& t = j.training;
  t.active = true;
  t.step = 120;
  t.total_steps = 240;
  t.steps_per_s = 4;
  t.has_metrics = true;
  t.metrics_step = 120;
  t.loss = 3.2;
  t.acc = 0.41;
  t.tau = 1.5;
  t.tok_s = 2048;
  return j;
}

bool Has(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
}

TEST(ProgressLineTest, TrainingShowsHowFarHowGoodHowLong) {
  const std::string line = FormatProgressLine(Training(), 200);
  for (const char* part : {"[tiny]", "step 120/240", "50%", "loss 3.200", "\u03c4 1.50",
                           "acc 0.41", "2048 tok/s", "30s elapsed", "ETA 30s",
                           "producer-bound"})
    EXPECT_TRUE(Has(line, part)) << part << " in: " << line;
  EXPECT_FALSE(Has(line, "81%")) << "the verdict is cut to a few words: " << line;
}

TEST(ProgressLineTest, EvaluatedTauAndAnEvalBoundLoop) {
  JobStatus j = Training();
  EXPECT_FALSE(Has(FormatProgressLine(j, 200), "eval")) << "no eval table, no eval field";
  j.training.eval.active = true;
  j.training.eval.tau = 3.25;
  j.verdict = "evaluation blocks training: 33% of wall in drafter.eval 33%";
  const std::string line = FormatProgressLine(j, 200);
  EXPECT_TRUE(Has(line, "eval \u03c4 3.25")) << line;
  EXPECT_EQ(ShortVerdict(j), "eval-bound");
}

TEST(ProgressLineTest, SharedGpuVerdictsAreShortToo) {
  JobStatus j = Training();
  j.verdict = "GPU 0 is shared by drafter and target (stream busy, overlapping: drafter 99%, "
              "target 62%): the drafter bounds: its GPU work never waits, the target's idles "
              "38% of the time waiting on it";
  EXPECT_EQ(ShortVerdict(j), "drafter-bound (shared GPU)");
  j.verdict = "GPU 0 is shared by target and drafter (stream busy, overlapping: target 95%, "
              "drafter 90%): the GPU bounds the job; every side keeps it busy, none waits long";
  EXPECT_EQ(ShortVerdict(j), "GPU-bound (shared)");
}

TEST(ProgressLineTest, FitsTheWidthDroppingTheLeastImportantFirst) {
  const JobStatus j = Training();
  for (int width : {20, 30, 45, 60, 80, 120}) {
    const std::string line = FormatProgressLine(j, width);
    EXPECT_LE(DisplayWidth(line), width) << line;
  }
  const std::string narrow = FormatProgressLine(j, 45);
  EXPECT_TRUE(Has(narrow, "step 120/240") && Has(narrow, "loss 3.200") && Has(narrow, "ETA 30s"))
      << narrow;
  EXPECT_FALSE(Has(narrow, "producer-bound")) << narrow;
  const std::string eighty = FormatProgressLine(j, 79);
  EXPECT_TRUE(Has(eighty, "producer-bound") && Has(eighty, "tok/s")) << eighty;
  EXPECT_FALSE(Has(eighty, "acc")) << eighty;
}

TEST(ProgressLineTest, BeforeTheFirstLogStepNumbersAreDashes) {
  JobStatus j = Training();
  j.training.has_metrics = false;
  j.training.steps_per_s = 0;
  const std::string line = FormatProgressLine(j, 200);
  EXPECT_TRUE(Has(line, "loss -") && Has(line, "ETA -")) << line;
}

TEST(ProgressLineTest, AJobKindWithNoTotalSaysSo) {
  JobStatus j;
  j.name = "pingpong";
  j.state = "running";
  j.seconds = 11.5;
  j.items_done = 101;
  j.items_per_s = 9;
  const std::string line = FormatProgressLine(j, 200);
  EXPECT_TRUE(Has(line, "items 101") && Has(line, "no total for this job kind")) << line;
  j.items_total = 202;
  const std::string with_total = FormatProgressLine(j, 200);
  EXPECT_TRUE(Has(with_total, "items 101/202") && Has(with_total, "ETA 11s")) << with_total;
}

TEST(ProgressLineTest, APendingJobIsStarting) {
  JobStatus j;
  j.name = "tiny";
  j.state = "pending";
  const std::string line = FormatProgressLine(j, 80);
  EXPECT_TRUE(Has(line, "pending: starting")) << line;
  EXPECT_FALSE(Has(line, "no total")) << line;
}

TEST(ProgressLineTest, Durations) {
  EXPECT_EQ(FormatDuration(42.4), "42s");
  EXPECT_EQ(FormatDuration(187), "3:07");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(-1), "?");
}

}  // namespace
}  // namespace tandem::cli
