// The drafter's `eval` table end to end on the CPU (actors/dflash/drafter_eval.h): the tiny
// job trains against a target that knows its data's rule (rule_target.h), so the tau that
// real speculative decoding measures moves as the drafter learns. Shown: every evaluation is
// an "eval" record of the metrics file, the last one is in `tandem status` (text, JSON) and
// Prometheus, its time is the profile stage drafter.eval, and CHECKPOINT_DIR/best names a
// complete checkpoint of the step with the highest tau, written although the step was not
// due for a checkpoint, on which `tandem eval` measures the same tau. Bad eval tables are
// refused before anything runs.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/drafter_eval_best.h"
#include "actors/dflash/job_test_util.h"
#include "models/speculative/spec_eval_run.h"
#include "runtime/control/metrics.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_status.h"
#include "runtime/job/runner.h"
#include "tests/eval/rule_target.h"

namespace tandem {
namespace {

using dflash::testing::FreshDir;
using dflash::testing::TinyJob;
using dflash::testing::TinyJobText;
using dflash::testing::EvalRecords;
using dflash::testing::RunJob;

#define EXPECT_CONTAINS(haystack, needle)                                              \
  do {                                                                                 \
    const std::string h_ = (haystack);                                                 \
    EXPECT_NE(h_.find(needle), std::string::npos) << h_ << "\nlacks: " << (needle);    \
  } while (0)

// The rule target of the tiny job's config and held-out prompts in `dir`; returns the
// prompts file.
std::string MakeRuleTarget(const std::string& dir) {
  const std::vector<int32_t> perm = testing::DataPermutation(
      dflash::testing::TinyTargetConfig().vocab_size, dflash::testing::kTinyJobSeed);
  for (int32_t p : perm) EXPECT_GE(p, 0) << "the data did not visit every token";
  testing::WriteRuleTarget(dir, dflash::testing::TinyTargetConfig(), perm);
  return testing::WriteRulePrompts(dir, perm, 6);
}

std::string EvalTable(const std::string& prompts, const std::string& more = "",
                      int every_steps = 30) {
  return fmt::format("eval = {{ every_steps = {}, prompts = \"{}\", max_prompts = 4, "
                     "max_new_tokens = 24{} }}", every_steps, prompts, more);
}


TEST(EvalDuringTrainingTest, TauInMetricsStatusProfileAndTheBestCheckpointKept) {
  const std::string target = FreshDir("evaljob_target"), ckpt = FreshDir("evaljob_ckpt");
  const std::string prompts = MakeRuleTarget(target);
  ASSERT_FALSE(::testing::Test::HasFailure());
  // 100 steps: evaluations at 30, 60, 90 and at the end (100); checkpoints only at the end,
  // so a best step before it is checkpointed because it is the best.
  TinyJob job{.name = "evaljob", .batches_per_epoch = 400, .max_steps = 100,
              .checkpoint_dir = ckpt, .checkpoint_every = 0,
              .drafter_extra = EvalTable(prompts), .model = target};
  auto spec = ParseJobText(TinyJobText(job), "evaljob.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRunner runner;
  auto report = runner.Run(*spec);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();

  const std::vector<nlohmann::json> evals = EvalRecords(ckpt + "/metrics.jsonl");
  ASSERT_EQ(evals.size(), 4u);
  const std::vector<int64_t> steps = {30, 60, 90, 100};
  size_t best_i = 0;
  double best_tau = -1;
  for (size_t i = 0; i < evals.size(); ++i) {
    const nlohmann::json& e = evals[i];
    fmt::print("eval at step {}: tau {:.3f}\n", e["step"].get<int64_t>(), e["tau"].get<double>());
    EXPECT_EQ(e["step"].get<int64_t>(), steps[i]);
    EXPECT_EQ(e["actor"], "drafter/0");
    EXPECT_EQ(e["prompts"], 4);
    EXPECT_EQ(e["tokens"], 4 * 24);
    EXPECT_EQ(e["block_size"], 16);
    ASSERT_EQ(e["accept_rate"].size(), 15u);
    // tau = 1 + the sum over positions of the share of steps that accepted that draft.
    double sum = 1;
    for (const auto& r : e["accept_rate"]) sum += r.get<double>();
    EXPECT_NEAR(e["tau"].get<double>(), sum, 1e-9);
    EXPECT_GE(e["tau"].get<double>(), 1.0);
    const bool is_best = e["tau"].get<double>() > best_tau;  // strictly: ties keep the first
    if (is_best) {
      best_tau = e["tau"].get<double>();
      best_i = i;
    }
    EXPECT_EQ(e["best"].get<bool>(), is_best);
    EXPECT_EQ(e["best_step"], evals[best_i]["step"]);
  }

  // DIR/best names the step of the highest tau, a complete checkpoint.
  auto best = dflash::ReadBestCheckpoint(ckpt);
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ((*best)->step, evals[best_i]["step"].get<int64_t>());
  EXPECT_DOUBLE_EQ((*best)->tau, evals[best_i]["tau"].get<double>());
  auto state = dflash::ReadStepState(ckpt, dflash::StepDirName((*best)->step));
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  // What the eval measured is what `tandem eval` measures on that checkpoint: the same
  // decode, to the verify step (whether tau moved much in this short run or not; that a
  // trained drafter's tau is clearly higher is eval_trained_test's).
  models::SpecEvalRequest q;
  q.target_dir = target;
  q.drafter_dir = state->path;
  q.prompts_file = prompts;
  q.max_new_tokens = 24;
  q.max_prompts = 4;
  q.baseline = false;
  auto offline = models::RunSpecEval(q);
  ASSERT_TRUE(offline.ok()) << offline.status().ToString();
  EXPECT_EQ(offline->run.verify_steps, evals[best_i]["verify_steps"].get<int64_t>());
  EXPECT_DOUBLE_EQ(offline->run.tau, (*best)->tau);

  // `tandem status` and Prometheus show the last evaluation.
  const JobStatus st = runner.Snapshot();
  const EvalStatus& e = st.training.eval;
  ASSERT_TRUE(e.active);
  EXPECT_EQ(e.step, 100);
  EXPECT_DOUBLE_EQ(e.tau, evals.back()["tau"].get<double>());
  EXPECT_EQ(e.best_step, (*best)->step);
  EXPECT_EQ(e.accept_rate.size(), 15u);
  EXPECT_CONTAINS(FormatJobStatus(st), fmt::format("eval: at step 100: tau {:.3f}", e.tau));
  EXPECT_CONTAINS(JobStatusToJson(st, 0), "\"best_tau\"");
  const std::string prom = FormatPrometheus({st});
  EXPECT_CONTAINS(prom, "tandem_eval_tau{job=\"\",job_name=\"evaljob\"} ");
  EXPECT_CONTAINS(prom, "tandem_eval_accept_rate{job=\"\",job_name=\"evaljob\",position=\"15\"}");
  // Its cost is a profile stage.
  EXPECT_CONTAINS(report->profile_table, "drafter.eval");
  EXPECT_CONTAINS(report->ToString(), fmt::format("best {:.3f} at step {}", (*best)->tau,
                                                  (*best)->step));
}

// Each problem is refused by the job check (`tandem validate`, `run`) naming the key.
TEST(EvalDuringTrainingTest, BadEvalTablesAreRefusedBeforeAnythingRuns) {
  const std::string dir = FreshDir("evaljob_bad");
  const std::string prompts = dir + "/prompts.jsonl";
  std::ofstream(prompts) << "{\"input_ids\": [1, 2, 3]}\n";
  auto check = [&](const std::string& extra, const std::string& ckpt_dir = "x",
                   const std::string& target_extra = "") {
    TinyJob job{.name = "bad", .max_steps = 10, .checkpoint_dir = ckpt_dir == "x" ? dir : ckpt_dir,
                .target_extra = target_extra, .drafter_extra = extra};
    auto spec = ParseJobText(TinyJobText(job), "bad.toml");
    if (!spec.ok()) return std::string(spec.status().message());
    Status s = JobRunner::Check(*spec);
    return s.ok() ? std::string("accepted") : std::string(s.message());
  };
  EXPECT_EQ(check(EvalTable(prompts)), "accepted");
  EXPECT_CONTAINS(check(EvalTable(dir + "/missing.jsonl")),
                  "actors.drafter.eval.prompts: '" + dir + "/missing.jsonl' does not exist");
  EXPECT_CONTAINS(check(EvalTable(dir)), "is not a regular file");
  EXPECT_CONTAINS(check("eval = { every_steps = 0, prompts = \"" + prompts + "\" }"),
                  "actors.drafter.eval.every_steps: 0 is out of range");
  EXPECT_CONTAINS(check("eval = { every_steps = 5 }"),
                  "actors.drafter.eval: missing required key 'prompts'");
  EXPECT_CONTAINS(check(EvalTable(prompts, ", every_step = 3")),
                  "did you mean every_steps?");
  EXPECT_CONTAINS(check(EvalTable(prompts, ", block_size = 17")),
                  "actors.drafter.eval.block_size: 17 is above the drafter's block_size 16");
  EXPECT_CONTAINS(check(EvalTable(prompts, ", temperature = -1")),
                  "actors.drafter.eval.temperature");
  EXPECT_CONTAINS(check(EvalTable(prompts, ", keep_best = true"), ""),
                  "actors.drafter.eval.keep_best: true needs checkpoint.dir");
  EXPECT_EQ(check(EvalTable(prompts), ""), "accepted");  // keep_best defaults to off then
  // An fp8 target decodes in fp8 (EvalDuringTrainingTest.Fp8TargetDecodesInFp8).
  EXPECT_EQ(check(EvalTable(prompts), "x", "precision = \"fp8\""), "accepted");
}

// With precision = "fp8" the evaluation's decoder runs the job's e4m3 target (CPU reference
// FP8 GEMMs here): the evaluations are recorded as with bf16.
TEST(EvalDuringTrainingTest, Fp8TargetDecodesInFp8) {
  const std::string target = FreshDir("evaljob_fp8_target"), ckpt = FreshDir("evaljob_fp8");
  const std::string prompts = MakeRuleTarget(target);
  ASSERT_FALSE(::testing::Test::HasFailure());
  TinyJob job{.name = "evalfp8", .batches_per_epoch = 400, .max_steps = 20,
              .checkpoint_dir = ckpt, .checkpoint_every = 0,
              .target_extra = "precision = \"fp8\"",
              .drafter_extra = EvalTable(prompts, "", 10), .model = target};
  auto report = RunJob(job);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  const std::vector<nlohmann::json> evals = EvalRecords(ckpt + "/metrics.jsonl");
  ASSERT_EQ(evals.size(), 2u);
  for (size_t i = 0; i < evals.size(); ++i) {
    EXPECT_EQ(evals[i]["step"].get<int64_t>(), 10 * static_cast<int64_t>(i + 1));
    EXPECT_EQ(evals[i]["prompts"], 4);
    EXPECT_GE(evals[i]["tau"].get<double>(), 1.0);
  }
}

// A prompt file without one usable prompt fails the job at the drafter's start, before its
// first step, naming the file and the first problem.
TEST(EvalDuringTrainingTest, PromptFileWithoutUsablePromptFailsAtStart) {
  const std::string dir = FreshDir("evaljob_noprompt");
  const std::string prompts = dir + "/prompts.jsonl";
  std::ofstream(prompts) << "{\"input_ids\": [1, 2, 999]}\nnot json\n";
  TinyJob job{.name = "noprompt", .batches_per_epoch = 40, .max_steps = 10,
              .checkpoint_dir = dir, .drafter_extra = EvalTable(prompts)};
  auto spec = ParseJobText(TinyJobText(job), "noprompt.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRunner runner;
  auto report = runner.Run(*spec);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_FALSE(report->status.ok());
  EXPECT_CONTAINS(report->status.ToString(), "eval.prompts");
  EXPECT_CONTAINS(report->status.ToString(), prompts + ": no usable prompt (2 lines");
  EXPECT_CONTAINS(report->status.ToString(), "id 2 is 999, not in [0, 128)");
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + dflash::StepDirName(1)));
}

// A resumed run continues from the best of the run it resumes (a new best must beat it);
// a fresh run in the same directory moves the old `best` aside with the old checkpoints.
TEST(EvalDuringTrainingTest, ResumeKeepsTheBestAndAFreshRunMovesItAside) {
  const std::string dir = FreshDir("evaljob_resume");
  const std::string prompts = MakeRuleTarget(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string ckpt = dir + "/ckpt";
  auto run = [&](int max_steps, const std::string& resume) {
    TinyJob job{.name = "resume", .batches_per_epoch = 400, .max_steps = max_steps,
                .checkpoint_dir = ckpt, .checkpoint_every = 10,
                .drafter_extra = EvalTable(prompts, "", 10) + "\nresume = " + resume,
                .model = dir};
    auto report = dflash::testing::RunJob(job);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    ASSERT_TRUE(report->status.ok()) << report->ToString();
  };
  ASSERT_NO_FATAL_FAILURE(run(10, "false"));
  // A best no later evaluation of this tiny run can reach.
  ASSERT_TRUE(dflash::WriteBestCheckpoint(ckpt, {10, 99.0, 4}).ok());
  ASSERT_NO_FATAL_FAILURE(run(20, "true"));
  std::vector<nlohmann::json> evals = EvalRecords(ckpt + "/metrics.jsonl");
  ASSERT_EQ(evals.size(), 2u);  // step 10 of the first run, step 20 of the resumed one
  EXPECT_EQ(evals[1]["step"], 20);
  EXPECT_EQ(evals[1]["best"], false);
  EXPECT_EQ(evals[1]["best_step"], 10);
  EXPECT_EQ(evals[1]["best_tau"], 99.0);
  auto best = dflash::ReadBestCheckpoint(ckpt);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->tau, 99.0);
  // Fresh: the old pointer goes with the old checkpoints; the first evaluation is the best.
  ASSERT_NO_FATAL_FAILURE(run(10, "false"));
  best = dflash::ReadBestCheckpoint(ckpt);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->step, 10);
  EXPECT_LT((*best)->tau, 99.0);
  int moved = 0;
  for (const auto& e : std::filesystem::directory_iterator(ckpt))
    if (e.path().filename().string().starts_with("previous-"))
      moved += std::filesystem::exists(e.path() / "best");
  EXPECT_EQ(moved, 1);
}

// DIR/best round-trips, and a damaged one is DataLoss naming the file, never a crash.
TEST(EvalDuringTrainingTest, BestPointerRoundTripsAndDamageIsNamed) {
  const std::string dir = FreshDir("evaljob_bestfile");
  auto none = dflash::ReadBestCheckpoint(dir);
  ASSERT_TRUE(none.ok() && !none->has_value());
  ASSERT_TRUE(dflash::WriteBestCheckpoint(dir, {1500, 4.8125, 8}).ok());
  std::ifstream f(dir + "/best");
  std::string line;
  std::getline(f, line);
  EXPECT_CONTAINS(line, "\"dir\":\"step_00001500\"");
  auto back = dflash::ReadBestCheckpoint(dir);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status().ToString();
  EXPECT_EQ((*back)->step, 1500);
  EXPECT_EQ((*back)->tau, 4.8125);
  EXPECT_EQ((*back)->prompts, 8);
  for (const char* bad : {"", "step_00001500\n", "{\"step\": \"x\", \"tau\": 1}",
                          "{\"step\": -3, \"tau\": 1}"}) {
    std::ofstream(dir + "/best") << bad;
    auto r = dflash::ReadBestCheckpoint(dir);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_CONTAINS(r.status().ToString(), dir + "/best");
  }
}

}  // namespace
}  // namespace tandem
