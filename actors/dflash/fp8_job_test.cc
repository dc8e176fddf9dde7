// FP8 in DFlash jobs. precision = "fp8" (target) and lm_head_precision = "fp8" (drafter) on a
// GPU without FP8 tensor cores are refused when the job is validated (JobRunner::Check,
// which Run calls first), with an error naming the key and the GPU, not later at the first
// FP8 GEMM; on sm_90 and with bf16 the same job validates. And the tiny CPU job trains with
// the FP8 LM head (CPU reference kernels) along the bf16 head's loss curve, with a DFlash
// drafter and with a DFlash2 one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "actors/dflash/job_test_util.h"
#include "runtime/sched/resources.h"

namespace tandem::dflash {
namespace {

Result<JobSpec> Job(const std::string& target_extra, const std::string& drafter_extra = "") {
  return ParseJobText(testing::TinyJobText({.name = "fp8-check",
                                            .max_steps = 1,
                                            .checkpoint_dir = testing::FreshDir("fp8ck"),
                                            .target_extra = target_extra,
                                            .drafter_extra = drafter_extra}),
                      "fp8-check.toml");
}

sched::NodeResources OneGpu(int compute_capability) {
  sched::NodeResources node = sched::FakeResources(1);
  node.gpus[0].name = "fake-sm" + std::to_string(compute_capability);
  node.gpus[0].compute_capability = compute_capability;
  return node;
}

TEST(Fp8ValidationTest, Fp8TargetBelowSm90IsRefusedAtValidation) {
  auto job = Job("gpus = 0.5\nprecision = \"fp8\"", "gpus = 0.5");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const sched::NodeResources old_gpu = OneGpu(86);
  const Status st = JobRunner::Check(*job, nullptr, &old_gpu);
  ASSERT_FALSE(st.ok());
  const std::string msg = st.ToString();
  EXPECT_NE(msg.find("actors.target.precision"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sm_86"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fake-sm86"), std::string::npos) << msg;
  // Run refuses it the same way, before any actor starts.
  JobRunner runner;
  runner.set_resources(old_gpu);
  auto run = runner.Run(*job);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().ToString().find("sm_86"), std::string::npos) << run.status().ToString();

  const sched::NodeResources hopper = OneGpu(90);
  EXPECT_TRUE(JobRunner::Check(*job, nullptr, &hopper).ok());
  auto bf16 = Job("gpus = 0.5\nprecision = \"bf16\"", "gpus = 0.5");
  ASSERT_TRUE(bf16.ok());
  EXPECT_TRUE(JobRunner::Check(*bf16, nullptr, &old_gpu).ok());
}

TEST(Fp8ValidationTest, Fp8LmHeadBelowSm90IsRefusedAtValidation) {
  auto job = Job("gpus = 0.5", "gpus = 0.5\nlm_head_precision = \"fp8\"");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const sched::NodeResources old_gpu = OneGpu(80);
  const Status st = JobRunner::Check(*job, nullptr, &old_gpu);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("actors.drafter.lm_head_precision"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.ToString().find("sm_80"), std::string::npos) << st.ToString();
  const sched::NodeResources hopper = OneGpu(90);
  EXPECT_TRUE(JobRunner::Check(*job, nullptr, &hopper).ok());
  auto bad = Job("", "lm_head_precision = \"fp4\"");
  ASSERT_TRUE(bad.ok());
  const Status bad_st = JobRunner::Check(*bad, nullptr, &hopper);
  EXPECT_NE(bad_st.ToString().find("lm_head_precision"), std::string::npos) << bad_st.ToString();
}

// The logged losses of a 60-step tiny job; `metrics` (optional) gets its metrics file.
std::vector<double> TrainLosses(const std::string& name, const std::string& drafter_extra,
                                std::string* metrics = nullptr) {
  const std::string dir = testing::FreshDir(name);
  auto report = testing::RunJob(
      {.name = name,
       .max_steps = 60,
       .checkpoint_dir = dir,
       .target_extra = "",
       .drafter_extra = fmt::format("metrics_file = \"{}/metrics.jsonl\"\n{}", dir,
                                    drafter_extra)});
  EXPECT_TRUE(report.ok() && report->status.ok())
      << (report.ok() ? report->ToString() : report.status().ToString());
  std::vector<double> out;
  std::ifstream f(dir + "/metrics.jsonl");
  std::string line;
  const std::regex re("\"loss\": ([0-9.eE+-]+)");
  for (std::smatch m; std::getline(f, line);) {
    if (metrics != nullptr) *metrics += line + "\n";
    if (std::regex_search(line, m, re)) out.push_back(std::stod(m[1]));
  }
  return out;
}

// Same seed and data: the curves differ only by the LM head's e4m3 rounding (a few % on the
// gradient, ~0.3% on the loss): six logs, every loss within 5%, not identical, and falling.
void ExpectFp8AlongBf16(const std::vector<double>& bf16, const std::vector<double>& fp8) {
  ASSERT_EQ(bf16.size(), 6u);
  ASSERT_EQ(fp8.size(), bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i)
    EXPECT_NEAR(fp8[i], bf16[i], 0.05 * bf16[i]) << "log " << i;
  EXPECT_NE(fp8, bf16) << "the FP8 head made no difference at all: did it run?";
  EXPECT_LT(fp8.back(), 0.9 * fp8.front()) << fmt::format("{}", fmt::join(fp8, " "));
}

TEST(Fp8LmHeadJobTest, TinyJobTrainsAlongTheBf16Curve) {
  const std::vector<double> bf16 = TrainLosses("lmhead_bf16", "");
  const std::vector<double> fp8 = TrainLosses("lmhead_fp8", "lm_head_precision = \"fp8\"");
  ExpectFp8AlongBf16(bf16, fp8);
}

// A DFlash2 drafter with the FP8 LM head: the transform and the selector's candidates come
// from the FP8 logits; the curve follows the bf16 head's, and the selector's numbers reach the
// metrics file.
TEST(Fp8LmHeadJobTest, DFlash2TrainsWithTheFp8Head) {
  const std::string d2 = "drafter_type = \"dflash2\"\nfinal_logit_softcapping = 30.0\n";
  const std::vector<double> bf16 = TrainLosses("d2_bf16", d2);
  std::string metrics;
  const std::vector<double> fp8 =
      TrainLosses("d2_fp8", d2 + "lm_head_precision = \"fp8\"\n", &metrics);
  ExpectFp8AlongBf16(bf16, fp8);
  EXPECT_NE(metrics.find("\"cand_recall\": "), std::string::npos) << metrics.substr(0, 2000);
}

}  // namespace
}  // namespace tandem::dflash
