// The runner's three parts with small job actors of this file: a job built from a placement
// that holds only some replicas runs exactly those, under their global names, and closes a
// channel when its local writers finish; a replica's Run is relaunched after its actor is
// restarted, until max_restarts runs out; a stop request wakes the supervisor at once (the
// progress interval is an hour, so nothing else would).
#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/actor/registry.h"
#include "runtime/job/job_actor.h"
#include "runtime/job/job_build.h"
#include "runtime/job/job_report.h"
#include "runtime/job/job_supervisor.h"
#include "runtime/job/runner.h"

namespace tandem {
namespace {

// Pushes `count` ints (replica * 1000 + i) into channel `out`.
class Writer final : public JobActor {
 public:
  Writer(const ConfigValue& s, const ActorContext&) : settings_(s) {}
  Result<std::string> Run(JobEnv* env) override {
    ASSIGN_OR_RETURN(std::string out, settings_.GetString("out", ""));
    ASSIGN_OR_RETURN(int64_t count, settings_.GetInt("count", 0));
    ASSIGN_OR_RETURN(auto ch, env->channels->Open<int64_t>(out));
    for (int64_t i = 0; i < count; ++i) RETURN_IF_ERROR(ch->Push(context().replica * 1000 + i));
    return fmt::format("wrote {}", count);
  }

 private:
  ConfigValue settings_;
};
TANDEM_REGISTER_ACTOR(Writer, "test.job.writer");

// Pops from channel `in` until it is closed and drained; reports the count and the sum.
class Reader final : public JobActor {
 public:
  Reader(const ConfigValue& s, const ActorContext&) : settings_(s) {}
  Result<std::string> Run(JobEnv* env) override {
    ASSIGN_OR_RETURN(std::string in, settings_.GetString("in", ""));
    ASSIGN_OR_RETURN(auto ch, env->channels->Open<int64_t>(in));
    int64_t n = 0, sum = 0;
    while (true) {
      Result<int64_t> v = ch->Pop();
      if (!v.ok()) break;  // closed and drained
      ++n;
      sum += *v;
    }
    if (env->stopping()) return CancelledError("{}: stopped", name());
    return fmt::format("read {} sum {}", n, sum);
  }

 private:
  ConfigValue settings_;
};
TANDEM_REGISTER_ACTOR(Reader, "test.job.reader");

// Fails its first `fail_runs` runs (one per instance: the restart count tells which).
class Flaky final : public JobActor {
 public:
  Flaky(const ConfigValue& s, const ActorContext&) : settings_(s) {}
  Result<std::string> Run(JobEnv*) override {
    ASSIGN_OR_RETURN(int64_t fail_runs, settings_.GetInt("fail_runs", 0));
    if (context().restarts < fail_runs)
      return DataLossError("deliberate failure {}", context().restarts + 1);
    return fmt::format("ran after {} restarts", context().restarts);
  }

 private:
  ConfigValue settings_;
};
TANDEM_REGISTER_ACTOR(Flaky, "test.job.flaky");

JobSpec Parse(const std::string& text) {
  Result<JobSpec> job = ParseJobText(text, "test.toml");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSpec{};
}

constexpr char kWriters[] = R"(
[job]
name = "subset"
[channels.nums]
capacity = 4
[actors.writer]
class = "test.job.writer"
replicas = 4
out = "nums"
count = 10
[actors.reader]
class = "test.job.reader"
replicas = 2
in = "nums"
)";

sched::Placement Only(const sched::Placement& all,
                      const std::vector<std::pair<std::string, int>>& keep) {
  sched::Placement p;
  for (const sched::ReplicaAssignment& r : all.replicas)
    if (std::find(keep.begin(), keep.end(), std::make_pair(r.group, r.replica)) != keep.end())
      p.replicas.push_back(r);
  return p;
}

TEST(JobBuildTest, SubsetOfReplicasRunsUnderGlobalNamesAndClosesItsChannels) {
  JobSpec job = Parse(kWriters);
  auto all = PlaceOnNode(job, sched::FakeResources(0));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->replicas.size(), 6u);
  auto built = BuildJob(job, Only(*all, {{"writer", 1}, {"writer", 3}, {"reader", 1}}),
                        {.make_device_current = false});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  std::vector<std::string> names;
  for (const JobReplica& r : (*built)->replicas) names.push_back(r.result.name);
  EXPECT_EQ(names, (std::vector<std::string>{"writer/1", "writer/3", "reader/1"}));
  EXPECT_EQ((*built)->local_writers["nums"], 2);
  EXPECT_EQ((*built)->replicas[1].replica, 3);

  // The reader returns only once both local writers finished and the channel was closed.
  JobSupervisor supervisor(built->get(), 3600);
  Status status = supervisor.Run();
  EXPECT_TRUE(status.ok()) << status.ToString();
  JobStatus final_status;
  JobReport report = FinishJob(**built, status, supervisor.stop_requested(), &final_status);
  EXPECT_TRUE(report.status.ok()) << report.ToString();
  EXPECT_EQ(final_status.state, "succeeded");
  ASSERT_EQ(report.actors.size(), 3u);
  // Replicas 1 and 3 wrote 1000..1009 and 3000..3009: their global indices.
  const int64_t sum = (1000 * 10 + 45) + (3000 * 10 + 45);
  EXPECT_EQ(report.actors[2].summary, fmt::format("read 20 sum {}", sum)) << report.ToString();
}

TEST(JobBuildTest, PlacementMustNameReplicasOfTheJob) {
  JobSpec job = Parse(kWriters);
  sched::ReplicaAssignment r;
  r.group = "writer";
  r.replica = 4;
  sched::Placement bad;
  bad.replicas.push_back(r);
  auto built = BuildJob(job, bad, {.make_device_current = false});
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("replica 4 is outside the group's 4 replicas"),
            std::string::npos) << built.status().ToString();
  r.group = "writers";
  r.replica = 0;
  sched::Placement unknown;
  unknown.replicas.push_back(r);
  built = BuildJob(job, unknown, {.make_device_current = false});
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("group 'writers', which the job does not have"),
            std::string::npos) << built.status().ToString();
}

std::string FlakyJob(int fail_runs, int max_restarts) {
  return fmt::format(R"(
[job]
name = "flaky"
[actors.flaky]
class = "test.job.flaky"
fail_runs = {}
max_restarts = {}
restart_backoff_s = 0.001
)", fail_runs, max_restarts);
}

TEST(JobBuildTest, RunIsRelaunchedAfterEachRestartWithinMaxRestarts) {
  JobSpec job = Parse(FlakyJob(2, 2));
  JobRunner runner({.progress_interval_s = 3600});
  auto report = runner.Run(job);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->status.ok()) << report->ToString();
  ASSERT_EQ(report->actors.size(), 1u);
  EXPECT_EQ(report->actors[0].summary, "ran after 2 restarts");
  EXPECT_EQ(report->actors[0].restarts, 2);
}

TEST(JobBuildTest, ExhaustedRestartsFailTheJobWithTheCause) {
  JobSpec job = Parse(FlakyJob(3, 1));
  JobRunner runner({.progress_interval_s = 3600});
  auto report = runner.Run(job);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->status.ok());
  EXPECT_NE(report->status.ToString().find("deliberate failure 2"), std::string::npos)
      << report->ToString();
  EXPECT_NE(report->status.ToString().find("flaky/0"), std::string::npos);
  EXPECT_EQ(report->actors[0].restarts, 1);
  EXPECT_EQ(runner.Snapshot().state, "failed");
}

TEST(JobBuildTest, StopRequestWakesTheSupervisor) {
  // A reader of a channel nobody writes: it returns only when the stop closes the channel.
  JobSpec job = Parse(R"(
[job]
name = "idle"
[channels.nums]
[actors.reader]
class = "test.job.reader"
in = "nums"
)");
  JobRunner runner({.progress_interval_s = 3600});
  std::atomic<bool> done{false};
  std::thread stopper([&] {
    // Wait until the reader is running, then ask for a stop.
    while (!done.load()) {
      JobStatus st = runner.Snapshot();
      if (st.state == "running") break;
      std::this_thread::yield();
    }
    runner.RequestStop();
  });
  auto report = runner.Run(job);
  done.store(true);
  stopper.join();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->status.ok()) << report->ToString();
  EXPECT_EQ(runner.Snapshot().state, "stopped");
}

}  // namespace
}  // namespace tandem
