// Asynchronous checkpoints, with the tiny CPU job through JobRunner and real files.
//   * the background write of a snapshot gives the same files, byte for byte, as a
//     synchronous checkpoint of the same run, although training went on while it was written;
//   * kill -9 during a background write leaves `latest` on the previous complete checkpoint,
//     and resume continues from it to the same weights as an uninterrupted run;
//   * a write that fails (a read-only directory) is the job's error, naming the path;
//   * a stop waits for the write in flight: both checkpoints end up complete.
// Kill and read-only run the job in a child process (this binary, re-run on one DISABLED_ test);
// the write is stopped by a test hook, not raced against a sleep.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "actors/dflash/checkpoint/checkpoint_resume.h"
#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/job_test_util.h"

extern char** environ;

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;
using testing::FreshDir;

constexpr const char* kChildDir = "TANDEM_ASYNC_CKPT_TEST_DIR";

Result<JobReport> RunTiny(const std::string& dir, int max_steps, const std::string& ck_extra,
                          const std::string& extra = "", DrafterFaults::Plan faults = {}) {
  return testing::RunJob({.name = "async-ckpt-test",
                          .batches_per_epoch = 100,
                          .max_steps = max_steps,
                          .checkpoint_dir = dir,
                          .checkpoint_every = 10,
                          .checkpoint_extra = ck_extra,
                          .drafter_extra = extra,
                          .faults = faults});
}

std::string Text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every file of a step directory, by name.
std::map<std::string, std::string> StepFiles(const std::string& step_dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(step_dir))
    out[e.path().filename().string()] = Text(e.path().string());
  return out;
}

TEST(AsyncCheckpointTest, SnapshotEqualsASynchronousCheckpointBitForBit) {
  const std::string async_dir = FreshDir("ckpt_async_hold"), sync_dir = FreshDir("ckpt_sync");
  // Each background write starts only after 7 more steps: step 10's files are written while
  // the weights are already at step 17, from the snapshot taken at step 10.
  auto a = RunTiny(async_dir, 30, "", "", {.hold_checkpoint_write = 7});
  ASSERT_TRUE(a.ok() && a->status.ok()) << (a.ok() ? a->ToString() : a.status().ToString());
  auto s = RunTiny(sync_dir, 30, ", async = false");
  ASSERT_TRUE(s.ok() && s->status.ok()) << (s.ok() ? s->ToString() : s.status().ToString());
  EXPECT_NE(a->actors[1].summary.find("checkpoints 3 (async)"), std::string::npos)
      << a->ToString();
  EXPECT_NE(s->actors[1].summary.find("checkpoints 3 (sync)"), std::string::npos)
      << s->ToString();
  for (const char* step : {"step_00000010", "step_00000020", "step_00000030"}) {
    auto af = StepFiles(async_dir + "/" + step), sf = StepFiles(sync_dir + "/" + step);
    ASSERT_EQ(af.size(), 5u) << step;  // config, model, optimizer, trainer and tandem state
    for (const auto& [name, bytes] : sf) {
      ASSERT_TRUE(af.count(name)) << step << "/" << name;
      EXPECT_TRUE(af[name] == bytes) << step << "/" << name << " differs";
    }
  }
  EXPECT_EQ(Text(async_dir + "/latest"), "step_00000030\n");
  // The profile names each part of a checkpoint.
  for (const char* stage : {"drafter.checkpoint.snapshot", "drafter.checkpoint.write",
                            "drafter.checkpoint.wait"})
    EXPECT_NE(a->profile_table.find(stage), std::string::npos) << a->profile_table;
}

TEST(AsyncCheckpointTest, SnapshotOverPinnedBudgetIsRefusedNamingTheKey) {
  const std::string dir = FreshDir("ckpt_budget");
  // The tiny job's drafter with a budget of 1000 bytes, far below its ~0.7 MB snapshot.
  auto spec = ParseJobText(
      std::regex_replace(testing::TinyJobText({.name = "budget", .batches_per_epoch = 100,
                                               .max_steps = 10, .checkpoint_dir = dir,
                                               .checkpoint_every = 10}),
                         std::regex("pinned_bytes = [0-9]+"), "pinned_bytes = 1000"),
      "budget.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRunner runner;
  auto report = runner.Run(*spec);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->status.ok());
  EXPECT_NE(report->ToString().find("the group's pinned_bytes is 1000 B; set pinned_bytes >= "),
            std::string::npos)
      << report->ToString();
}

TEST(AsyncCheckpointTest, StopWaitsForTheWriteInFlight) {
  const std::string dir = FreshDir("ckpt_stop");
  // Step 10's write is held until the loop waits for it: it is in flight at the stop.
  auto spec = ParseJobText(testing::TinyJobText({.name = "stop", .batches_per_epoch = 400,
                                                 .max_steps = 400, .checkpoint_dir = dir,
                                                 .checkpoint_every = 10}),
                           "stop.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRunner runner(testing::WithFaults({.hold_checkpoint_write = 100000}));
  std::optional<Result<JobReport>> report;
  std::thread job([&] { report = runner.Run(*spec); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (runner.Snapshot().training.step < 13 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  runner.RequestStop();
  job.join();
  ASSERT_TRUE(report && report->ok()) << report->status().ToString();
  const std::string text = (*report)->ToString();
  // The stop ends the run gracefully at some step N (the drafter either sees the stop or
  // its channel closing first); N was checkpointed after the held write of step 10.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("(?:stopped at step |steps )([0-9]+)")))
      << text;
  const int64_t n = std::stoll(m[1]);
  EXPECT_GE(n, 13) << text;
  EXPECT_LT(n, 400) << "the stop came too late to test: " << text;
  auto ten = ReadStepState(dir, "step_00000010");
  ASSERT_TRUE(ten.ok()) << ten.status().ToString();
  EXPECT_TRUE(VerifyStepFiles(*ten, ResumeMode::kOn).ok());
  auto latest = ReadLatestState(dir);
  ASSERT_TRUE(latest.ok() && latest->has_value()) << latest.status().ToString() << text;
  EXPECT_EQ((*latest)->step, n) << text;
  EXPECT_TRUE(VerifyStepFiles(**latest, ResumeMode::kOn).ok());
}

// ---- child processes ----

// Runs this test binary on `test` with kChildDir = dir; returns its pid.
pid_t SpawnChild(const std::string& test, const std::string& dir) {
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {exe, "--gtest_filter=AsyncCheckpointChild.DISABLED_" + test,
                                   "--gtest_also_run_disabled_tests"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = {fmt::format("{}={}", kChildDir, dir)};
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  return pid;
}

// Waits (polling, no fixed sleep) until `path` exists or the child exits; true if it exists.
bool WaitForFileOrExit(const std::string& path, pid_t pid, int* status) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(path)) return true;
    if (waitpid(pid, status, WNOHANG) == pid) return fs::exists(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int WaitChild(pid_t pid) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "the child did not finish in 10 minutes";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

TEST(AsyncCheckpointTest, KillDuringBackgroundWriteKeepsLatestAndResumes) {
  const std::string dir = FreshDir("ckpt_kill"), ref = FreshDir("ckpt_kill_ref");
  const pid_t pid = SpawnChild("StallsInTheWriteOfStep20", dir);
  ASSERT_GT(pid, 0);
  int status = 0;
  const bool stalled = WaitForFileOrExit(dir + "/step_00000020/STALLED_BY_TEST", pid, &status);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  waitpid(pid, &status, 0);
  ASSERT_TRUE(stalled) << "the child never reached the stalled write of step 20";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // Killed with step 20's tensor files on disk but not committed: `latest` is step 10, which
  // is complete and verifies; step 20 is an incomplete directory.
  EXPECT_EQ(Text(dir + "/latest"), "step_00000010\n");
  auto latest = ReadLatestState(dir);
  ASSERT_TRUE(latest.ok() && latest->has_value()) << latest.status().ToString();
  EXPECT_TRUE(VerifyStepFiles(**latest, ResumeMode::kOn).ok());
  EXPECT_TRUE(fs::exists(dir + "/step_00000020/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/step_00000020/tandem_state.json"));

  auto resumed = RunTiny(dir, 40, "", "resume = true\n");
  ASSERT_TRUE(resumed.ok() && resumed->status.ok()) << resumed->ToString();
  EXPECT_NE(resumed->actors[1].summary.find("steps 40 (from 10)"), std::string::npos)
      << resumed->ToString();
  EXPECT_EQ(Text(dir + "/latest"), "step_00000040\n");
  // The same weights and optimizer state as a run that was never interrupted.
  auto whole = RunTiny(ref, 40, "");
  ASSERT_TRUE(whole.ok() && whole->status.ok()) << whole->ToString();
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(Text(dir + "/step_00000040/" + f) == Text(ref + "/step_00000040/" + f)) << f;
}

TEST(AsyncCheckpointTest, FailedBackgroundWriteIsTheJobsErrorWithThePath) {
  const std::string root = FreshDir("ckpt_readonly");
  const std::string ck = root + "/ck", out = root + "/out";
  // FreshDir's per-process folder is mkdtemp's (0700): the unprivileged child must get through.
  fs::permissions(fs::path(root).parent_path(),
                  fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add);
  fs::create_directories(ck);
  fs::create_directories(out);
  // The checkpoint directory is read-only; `out` (metrics, the child's report) is writable by
  // the unprivileged user the child becomes when the test runs as root.
  // Its lock file (runtime/core/dir_lock.h) exists and is writable, so the job starts (a dir
  // whose lock cannot be created is refused before training) and fails in the background write.
  { std::ofstream lock(ck + "/.tandem-lock"); }
  ASSERT_EQ(chmod((ck + "/.tandem-lock").c_str(), 0666), 0);
  ASSERT_EQ(chmod(ck.c_str(), 0555), 0);
  ASSERT_EQ(chmod(out.c_str(), 0777), 0);
  const pid_t pid = SpawnChild("RunsWithAReadOnlyCheckpointDir", root);
  ASSERT_GT(pid, 0);
  const int status = WaitChild(pid);
  // Not a crash: the child ran the job to its error and wrote the report.
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  const std::string report = Text(out + "/report.txt");
  ASSERT_FALSE(report.empty()) << "the child wrote no report (exit " << WEXITSTATUS(status) << ")";
  if (report.starts_with("SKIP: ")) GTEST_SKIP() << report.substr(6);
  EXPECT_NE(report.find("FAILED"), std::string::npos) << report;
  EXPECT_NE(report.find("cannot create checkpoint dir " + ck + "/step_00000010: Permission denied"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("written in the background"), std::string::npos) << report;
  EXPECT_FALSE(fs::exists(ck + "/latest"));
}

// The child halves. Disabled, so they run only when the tests above start them.
TEST(AsyncCheckpointChild, DISABLED_StallsInTheWriteOfStep20) {
  const char* dir = std::getenv(kChildDir);
  ASSERT_NE(dir, nullptr);
  // Never returns: the write of step 20 stalls until the parent kills this process.
  (void)RunTiny(dir, 40, "", "", {.stall_checkpoint_write_at_step = 20});
  ADD_FAILURE() << "the job ended although its write of step 20 stalls";
}

TEST(AsyncCheckpointChild, DISABLED_RunsWithAReadOnlyCheckpointDir) {
  const char* root = std::getenv(kChildDir);
  ASSERT_NE(root, nullptr);
  const std::string out = std::string(root) + "/out";
  // Root writes anywhere: become nobody, to whom 0555 is read-only.
  if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
    std::ofstream(out + "/report.txt") << "SKIP: running as root and cannot drop privileges";
    return;
  }
  auto r = RunTiny(std::string(root) + "/ck", 30, "",
                   fmt::format("metrics_file = \"{}/metrics.jsonl\"\n", out));
  std::ofstream(out + "/report.txt") << (r.ok() ? r->ToString() : r.status().ToString());
}

}  // namespace
}  // namespace tandem::dflash
