// JobMetrics: the header carries the schema and the job's settings, train records carry
// what was published, samples turn cumulative stage totals into per-window time, the live
// TrainingStatus follows the slowest replica, and a second file is refused.
#include "runtime/job/job_metrics.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/scratch_dir.h"

namespace tandem {
namespace {

std::vector<nlohmann::json> ReadRecords(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

ProfileSnapshot Stages(int64_t fwd_ns, int64_t wait_ns) {
  ProfileSnapshot s;
  StageReport a, b;
  a.name = "drafter.forward_backward";
  a.cumulative.total_ns = fwd_ns;
  a.cumulative.count = 3;
  b.name = "drafter.queue_get";
  b.cumulative.total_ns = wait_ns;
  s.stages = {a, b};
  return s;
}

TEST(JobMetricsTest, WritesHeaderTrainSampleAndEndRecords) {
  JobSpec job;  // built by hand: this test is about the metrics, not job-file keys
  job.name = "m";
  job.path = "m.toml";
  job.channels.push_back({"c", 3, 1});
  ActorGroupSpec g;
  g.name = "a";
  g.class_name = "demo.consumer";
  g.settings = ConfigValue::MakeTable();
  g.settings.Set("class", "demo.consumer");
  g.settings.Set("lr", 0.5);
  job.actors.push_back(g);
  const testing::ScratchDir scratch;  // not a fixed name: two runs at once share TMPDIR
  const std::string dir = scratch.path();
  const std::string path = dir + "/sub/metrics.jsonl";
  JobMetrics m(&job, SteadyClock::now());
  EXPECT_FALSE(m.Training().active);
  ASSERT_TRUE(m.OpenFile(path, /*append=*/false).ok());
  EXPECT_TRUE(m.OpenFile(path, true).ok());  // a restarted actor: no-op
  EXPECT_FALSE(m.OpenFile(dir + "/other.jsonl", false).ok());
  m.SetStep("a/0", 0, 100);
  m.SetStep("a/1", 0, 100);
  m.SetStep("a/0", 10, 100);
  m.SetStep("a/1", 8, 100);
  m.Record("a/0", {10, 100, 2.5, 0.25, 1.75, 1.0, 1e-3, 500});
  m.Record("a/1", {10, 100, 3.5, 0.35, 1.25, 1.0, 1e-3, 300});
  StoreStats store;
  store.capacity = 1000;
  store.bytes_used = 200;
  store.high_water = 400;
  ChannelStats ch;
  ch.name = "c";
  ch.depth = 2;
  ch.capacity = 3;
  m.Sample(store, {ch}, Stages(2'000'000'000, 500'000'000), 7);
  m.Sample(store, {ch}, Stages(3'500'000'000, 500'000'000), 9);
  m.End("succeeded", "");

  const TrainingStatus t = m.Training();
  EXPECT_TRUE(t.active && t.has_metrics);
  EXPECT_EQ(t.step, 8);  // the slowest replica
  EXPECT_EQ(t.total_steps, 100);
  EXPECT_DOUBLE_EQ(t.loss, 3.0);
  EXPECT_DOUBLE_EQ(t.tau, 1.5);
  EXPECT_DOUBLE_EQ(t.tok_s, 800);  // replicas' rates add up

  const auto r = ReadRecords(path);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0]["kind"], "header");
  EXPECT_EQ(r[0]["schema"], kMetricsSchemaVersion);
  EXPECT_EQ(r[0]["job"], "m");
  EXPECT_EQ(r[0]["settings"]["actors.a.lr"], "0.5");
  EXPECT_EQ(r[0]["settings"]["channels.c.capacity"], "3");
  EXPECT_EQ(r[1]["kind"], "train");
  EXPECT_EQ(r[1]["actor"], "a/0");
  EXPECT_EQ(r[1]["step"], 10);
  EXPECT_DOUBLE_EQ(r[1]["loss"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(r[2]["tau"].get<double>(), 1.25);
  EXPECT_EQ(r[3]["kind"], "sample");
  EXPECT_EQ(r[3]["store"]["high_water"], 400);
  EXPECT_EQ(r[3]["channels"]["c"]["depth"], 2);
  EXPECT_DOUBLE_EQ(r[3]["stages"]["drafter.forward_backward"]["seconds"].get<double>(), 2.0);
  // The second sample holds the time spent since the first, not the running total.
  EXPECT_DOUBLE_EQ(r[4]["stages"]["drafter.forward_backward"]["seconds"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(r[4]["stages"]["drafter.queue_get"]["seconds"].get<double>(), 0.0);
  EXPECT_EQ(r[5]["kind"], "end");
  EXPECT_EQ(r[5]["state"], "succeeded");
}

TEST(JobMetricsTest, NonFiniteNumbersAreNullAndAFreshRunTruncates) {
  const testing::ScratchDir scratch;
  const std::string path = scratch.File("nan.jsonl");
  {
    std::ofstream old(path);
    old << "an older run\n";
  }
  JobMetrics m(nullptr, SteadyClock::now());
  ASSERT_TRUE(m.OpenFile(path, /*append=*/false).ok());
  m.Record("d/0", {1, 2, std::nan(""), 0, 1, INFINITY, 0, 0});
  const auto r = ReadRecords(path);  // parses: "an older run" is gone
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[1]["loss"].is_null());
  EXPECT_TRUE(r[1]["grad_norm"].is_null());
}

// A DFlash2 drafter's selector numbers go into its train records (a DFlash drafter's
// records have none) and the live status averages them over the replicas that have them.
TEST(JobMetricsTest, SelectorMetricsOnlyWhereADrafterHasASelector) {
  const testing::ScratchDir scratch;
  const std::string path = scratch.File("sel.jsonl");
  JobMetrics m(nullptr, SteadyClock::now());
  ASSERT_TRUE(m.OpenFile(path, /*append=*/false).ok());
  EXPECT_FALSE(m.Training().selector.active);
  m.Record("dflash/0", {5, 10, 2.0, 0.5, 2.0, 1.0, 1e-3, 100});
  EXPECT_FALSE(m.Training().selector.active);
  TrainPoint a{5, 10, 2.0, 0.5, 2.0, 1.0, 1e-3, 100, {true, 1.25, 0.75, 0.5}};
  TrainPoint b{5, 10, 2.0, 0.5, 2.0, 1.0, 1e-3, 100, {true, 0.75, 0.25, 0.25}};
  m.Record("d2/0", a);
  m.Record("d2/1", b);
  const SelectorMetrics s = m.Training().selector;
  EXPECT_TRUE(s.active);
  EXPECT_DOUBLE_EQ(s.loss, 1.0);  // the two DFlash2 replicas, not the DFlash one
  EXPECT_DOUBLE_EQ(s.recall, 0.5);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.375);
  const auto r = ReadRecords(path);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_FALSE(r[1].contains("sel_loss"));
  EXPECT_DOUBLE_EQ(r[2]["sel_loss"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(r[2]["cand_recall"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(r[3]["sel_acc"].get<double>(), 0.25);
}

// Evaluations by speculative decoding: an "eval" record each, and the live status shows the
// latest one with the best so far; its text form names both.
TEST(JobMetricsTest, EvalRecordsAndTheLatestEvalInTheStatus) {
  const testing::ScratchDir scratch;
  const std::string path = scratch.File("eval.jsonl");
  JobMetrics m(nullptr, SteadyClock::now());
  ASSERT_TRUE(m.OpenFile(path, /*append=*/false).ok());
  m.SetStep("d/0", 20, 40);
  EXPECT_FALSE(m.Training().eval.active);
  EvalPoint p;
  p.step = 20;
  p.tau = 2.5;
  p.accept_rate = {0.75, 0.5, 0.25};
  p.tok_s = 123;
  p.prompts = 4;
  p.tokens = 96;
  p.verify_steps = 38;
  p.block_size = 4;
  p.best = true;
  p.best_step = 20;
  p.best_tau = 2.5;
  m.RecordEval("d/0", p);
  p.step = 40;
  p.tau = 2.0;
  p.best = false;
  m.RecordEval("d/0", p);
  const TrainingStatus t = m.Training();
  ASSERT_TRUE(t.eval.active);
  EXPECT_EQ(t.eval.step, 40);
  EXPECT_DOUBLE_EQ(t.eval.tau, 2.0);
  EXPECT_EQ(t.eval.best_step, 20);
  EXPECT_DOUBLE_EQ(t.eval.best_tau, 2.5);
  EXPECT_EQ(t.eval.accept_rate, (std::vector<double>{0.75, 0.5, 0.25}));
  const auto r = ReadRecords(path);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1]["kind"], "eval");
  EXPECT_EQ(r[1]["actor"], "d/0");
  EXPECT_EQ(r[1]["step"], 20);
  EXPECT_EQ(r[1]["best"], true);
  EXPECT_EQ(r[1]["accept_rate"].size(), 3u);
  EXPECT_EQ(r[2]["best"], false);
  EXPECT_EQ(r[2]["best_step"], 20);
  JobStatus j;
  j.training = t;
  const std::string text = FormatJobStatus(j);
  EXPECT_NE(text.find("eval: at step 40: tau 2.000 (best 2.500 at step 20), 4 prompts, 123.0 "
                      "tok/s decoding; accepted by draft position: 0.75 0.50 0.25"),
            std::string::npos)
      << text;
  const nlohmann::json js = nlohmann::json::parse(JobStatusToJson(j, 0));
  EXPECT_EQ(js["training"]["eval"]["best_step"], 20);
}

}  // namespace
}  // namespace tandem
