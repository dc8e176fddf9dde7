// JobManager with several jobs on one node: a job whose GPUs are held by
// running jobs is queued, says what it waits for, and starts when they end; CPU jobs never
// wait for each other. Runs on fake GPUs (TANDEM_FAKE_GPUS).
#include "runtime/control/job_manager.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/control/server_test_util.h"
#include "runtime/actor/config_keys.h"
#include "runtime/actor/registry.h"
#include "runtime/job/job_actor.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using testing::WaitFor;

// Runs until its job is stopped.
class UntilStopped : public JobActor {
 public:
  UntilStopped(const ConfigValue&, const ActorContext&) {}
  Result<std::string> Run(JobEnv* env) override {
    // A poll interval, not a timing assumption (the stop flags have no notification); the
    // tests wait on job states, never on this loop's timing.
    while (!env->stopping() && !stop_requested()) std::this_thread::sleep_for(5ms);
    return CancelledError("{}: stopped", name());
  }
};
TANDEM_REGISTER_ACTOR(UntilStopped, "test.until_stopped");

// The same, with a checkpoint-like directory that one running job at a time may use.
KeyTable DirKeys() {
  KeyTable t("test.until_stopped_dir");
  KeyTable ck("checkpoint");
  ck.String("dir", "a directory one job uses at a time").Default("").ExclusiveDir();
  t.Table("checkpoint", "{ dir }").Keys(ck);
  return t;
}
class UntilStoppedDir final : public UntilStopped {
 public:
  using UntilStopped::UntilStopped;
};
TANDEM_REGISTER_ACTOR(UntilStoppedDir, "test.until_stopped_dir", DirKeys());

JobSpec Job(const std::string& name, double gpus) {
  auto spec = ParseJobText(fmt::format(R"(
[job]
name = "{}"

[actors.worker]
class = "test.until_stopped"
gpus = {}
)", name, gpus), name + ".toml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return *spec;
}

JobSpec DirJob(const std::string& name, const std::string& dir, double cpus = 0) {
  auto spec = ParseJobText(fmt::format(R"(
[job]
name = "{}"

[actors.worker]
class = "test.until_stopped_dir"
cpus = {}
checkpoint = {{ dir = "{}" }}
)", name, cpus, dir), name + ".toml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return *spec;
}

std::string State(JobManager& m, const std::string& id) {
  auto st = m.Statuses(id);
  return st.ok() ? st->front().state : st.status().ToString();
}

class JobQueueTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("TANDEM_FAKE_GPUS", "2", 1); }
  void TearDown() override { ::unsetenv("TANDEM_FAKE_GPUS"); }
};

TEST_F(JobQueueTest, JobsWaitForHeldGpusAndStartWhenTheyFree) {
  JobManager m("daemon", /*echo_logs=*/false);
  const std::string a = m.Submit(Job("a", 1));
  const std::string b = m.Submit(Job("b", 1));
  const std::string c = m.Submit(Job("c", 1));  // two fake GPUs: c must wait
  ASSERT_TRUE(WaitFor([&] { return State(m, a) == "running" && State(m, b) == "running"; }))
      << State(m, a) << " " << State(m, b);
  auto sc = m.Statuses(c);
  ASSERT_TRUE(sc.ok());
  EXPECT_EQ(sc->front().state, "queued");
  EXPECT_FALSE(sc->front().finished());
  EXPECT_NE(sc->front().verdict.find("GPU 0 by j1, GPU 1 by j2"), std::string::npos)
      << sc->front().verdict;
  const std::string d = m.Submit(Job("d", 0.5));  // behind c: arrival order is kept
  EXPECT_EQ(State(m, d), "queued");

  ASSERT_TRUE(m.Stop(b).ok());
  ASSERT_TRUE(WaitFor([&] { return State(m, c) == "running"; })) << State(m, c);
  EXPECT_EQ(State(m, d), "queued");  // a and c hold both GPUs
  auto rb = m.Wait(b);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(State(m, b), "stopped");

  ASSERT_TRUE(m.Stop(d).ok());  // stopping a queued job: it never runs
  EXPECT_EQ(State(m, d), "stopped");
  auto rd = m.Wait(d);
  EXPECT_EQ(rd.status().code(), StatusCode::kCancelled);
  m.StopAll();
  for (const auto& id : {a, c}) EXPECT_TRUE(m.Wait(id).ok());
}

TEST_F(JobQueueTest, CpuJobsRunSideBySide) {
  JobManager m("daemon", /*echo_logs=*/false);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(m.Submit(Job("cpu" + std::to_string(i), 0)));
  for (const auto& id : ids)
    EXPECT_TRUE(WaitFor([&] { return State(m, id) == "running"; })) << id << ": " << State(m, id);
  m.StopAll();
  for (const auto& id : ids) EXPECT_TRUE(m.Wait(id).ok());
}

// CPU jobs that share a checkpoint dir (the tiny job's) must not all start and write over
// each other. A job whose dir a running job uses waits for it, and says so.
TEST_F(JobQueueTest, JobsSharingACheckpointDirRunOneAtATime) {
  char tmpl[] = "/tmp/tandem-jobq-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/ckpt", other = std::string(tmpl) + "/other";
  JobManager m("daemon", /*echo_logs=*/false);
  const std::string a = m.Submit(DirJob("a", dir));
  const std::string b = m.Submit(DirJob("b", dir));
  const std::string c = m.Submit(DirJob("c", other));  // behind b: arrival order is kept
  ASSERT_TRUE(WaitFor([&] { return State(m, a) == "running"; })) << State(m, a);
  auto sb = m.Statuses(b);
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->front().state, "queued");
  const std::string& v = sb->front().verdict;
  EXPECT_NE(v.find("actors.worker.checkpoint.dir '" + dir + "'"), std::string::npos) << v;
  EXPECT_NE(v.find("running job j1 ('a')"), std::string::npos) << v;
  EXPECT_EQ(State(m, c), "queued");
  ASSERT_TRUE(m.Stop(a).ok());
  ASSERT_TRUE(WaitFor([&] { return State(m, b) == "running" && State(m, c) == "running"; }))
      << State(m, b) << " " << State(m, c);
  m.StopAll();
  for (const auto& id : {a, b, c}) EXPECT_TRUE(m.Wait(id).ok()) << id;
  std::filesystem::remove_all(tmpl);
}

// The queue counts CPU slots too, not only GPUs.
TEST_F(JobQueueTest, JobsWaitForHeldCpuSlots) {
  const int slots = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  char tmpl[] = "/tmp/tandem-jobq-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  JobManager m("daemon", /*echo_logs=*/false);
  const std::string a = m.Submit(DirJob("a", std::string(tmpl) + "/a", slots));
  const std::string b = m.Submit(DirJob("b", std::string(tmpl) + "/b", 1));
  ASSERT_TRUE(WaitFor([&] { return State(m, a) == "running"; })) << State(m, a);
  auto sb = m.Statuses(b);
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->front().state, "queued");
  EXPECT_NE(sb->front().verdict.find(fmt::format("{} of {} CPU slots", slots, slots)),
            std::string::npos) << sb->front().verdict;
  ASSERT_TRUE(m.Stop(a).ok());
  ASSERT_TRUE(WaitFor([&] { return State(m, b) == "running"; })) << State(m, b);
  m.StopAll();
  for (const auto& id : {a, b}) EXPECT_TRUE(m.Wait(id).ok()) << id;
  std::filesystem::remove_all(tmpl);
}

TEST_F(JobQueueTest, ShutdownCancelsQueuedJobs) {
  std::string queued;
  {
    JobManager m("daemon", /*echo_logs=*/false);
    const std::string a = m.Submit(Job("a", 2));
    queued = m.Submit(Job("b", 1));
    ASSERT_TRUE(WaitFor([&] { return State(m, a) == "running"; }));
    EXPECT_EQ(State(m, queued), "queued");
  }  // the destructor stops a, cancels b, and joins
}

}  // namespace
}  // namespace tandem
