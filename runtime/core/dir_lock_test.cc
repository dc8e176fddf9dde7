// DirLock across two real processes (fork): the second holder is refused with the directory
// and the first holder named; a holder killed with SIGKILL leaves a stale record that the
// next one takes over and reports. Single-threaded binary (fork is only safe that way).
#include "runtime/core/dir_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tandem {
namespace {

namespace fs = std::filesystem;

class DirLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem-dirlock-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_, dir_;
};

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_F(DirLockTest, SecondHolderInOneProcessIsRefusedUntilTheFirstReleases) {
  std::string took_over = "x";
  Result<DirLock> a = DirLock::Acquire(dir_, "job 'tiny' (j1)", "checkpoint dir", &took_over);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(fs::is_directory(dir_)) << "made when missing";
  EXPECT_EQ(took_over, "");
  Result<DirLock> b = DirLock::Acquire(dir_, "job 'tiny' (j2)", "checkpoint dir");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  const std::string& m = b.status().message();
  EXPECT_TRUE(Contains(m, "checkpoint dir '" + dir_ + "' is in use")) << m;
  EXPECT_TRUE(Contains(m, "job 'tiny' (j1)")) << m;
  EXPECT_TRUE(Contains(m, "pid " + std::to_string(::getpid()))) << m;
  a->Release();
  Result<DirLock> c = DirLock::Acquire(dir_, "job 'tiny' (j3)", "checkpoint dir", &took_over);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(took_over, "") << "a released lock leaves no stale record";
  DirLock moved = std::move(*c);
  EXPECT_TRUE(moved.held());
  EXPECT_FALSE(DirLock::Acquire(dir_, "j4").ok()) << "the moved lock still holds";
}

TEST_F(DirLockTest, AFileInsideAHeldDirectoryIsReportedWithItsHolder) {
  EXPECT_TRUE(DirLock::CheckNotInHeldDir(dir_ + "/metrics.jsonl", "metrics_file").ok());
  Result<DirLock> a = DirLock::Acquire(dir_, "job 'tiny' (j1)", "checkpoint dir");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  fs::create_directories(dir_ + "/step-10");
  for (const std::string& file : {dir_ + "/metrics.jsonl", dir_ + "/step-10/m.jsonl"}) {
    Status st = DirLock::CheckNotInHeldDir(file, "metrics_file");
    ASSERT_FALSE(st.ok()) << file;
    EXPECT_EQ(st.code(), StatusCode::kUnavailable);
    EXPECT_TRUE(Contains(st.message(), "metrics_file '" + file + "' is inside '" + dir_ + "'"))
        << st.message();
    EXPECT_TRUE(Contains(st.message(), "job 'tiny' (j1)")) << st.message();
  }
  // The caller's own directory, and files beside the held one, are fine.
  EXPECT_TRUE(DirLock::CheckNotInHeldDir(dir_ + "/metrics.jsonl", "metrics_file", dir_).ok());
  EXPECT_TRUE(DirLock::CheckNotInHeldDir(root_ + "/metrics.jsonl", "metrics_file").ok());
  // The probe took nothing: the holder keeps its lock and, released, the dir is free.
  EXPECT_FALSE(DirLock::Acquire(dir_, "j2").ok());
  a->Release();
  EXPECT_TRUE(DirLock::CheckNotInHeldDir(dir_ + "/metrics.jsonl", "metrics_file").ok());
}

TEST_F(DirLockTest, AFileIsNotADirectory) {
  std::ofstream(root_ + "/file") << "x";
  Result<DirLock> l = DirLock::Acquire(root_ + "/file", "j1", "checkpoint dir");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(l.status().message(), root_ + "/file")) << l.status().message();
}

// The child takes the lock, says so on a pipe, and waits to be killed.
pid_t LockInChild(const std::string& dir) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    Result<DirLock> l = DirLock::Acquire(dir, "job 'other' (j9)", "checkpoint dir");
    const char c = l.ok() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    while (true) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  const bool ok = ::read(ready[0], &c, 1) == 1 && c == 'y';
  ::close(ready[0]);
  if (!ok) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

TEST_F(DirLockTest, AnotherProcessIsRefusedAndAKilledHoldersLockIsTakenOver) {
  const pid_t child = LockInChild(dir_);
  ASSERT_GT(child, 0) << "the child could not lock";
  Result<DirLock> mine = DirLock::Acquire(dir_, "job 'tiny' (j1)", "checkpoint dir");
  ASSERT_FALSE(mine.ok()) << "two processes hold " << dir_;
  EXPECT_EQ(mine.status().code(), StatusCode::kUnavailable);
  const std::string& m = mine.status().message();
  EXPECT_TRUE(Contains(m, dir_)) << m;
  EXPECT_TRUE(Contains(m, "job 'other' (j9)")) << m;
  EXPECT_TRUE(Contains(m, "pid " + std::to_string(child))) << m;

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::string took_over;
  mine = DirLock::Acquire(dir_, "job 'tiny' (j1)", "checkpoint dir", &took_over);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_TRUE(Contains(took_over, "stale lock")) << took_over;
  EXPECT_TRUE(Contains(took_over, "pid " + std::to_string(child))) << took_over;
  EXPECT_TRUE(Contains(took_over, "no longer running")) << took_over;
}

}  // namespace
}  // namespace tandem
