// The daemon's parts against real sockets: one daemon per home (a second one reports the
// first's pid), stale `tandem run` sockets removed at start, and status answered while a
// submitted job is still being checked.
#include "runtime/control/daemon.h"

#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/control/client.h"
#include "runtime/control/home.h"
#include "runtime/control/job_manager.h"
#include "runtime/control/server.h"
#include "runtime/control/server_test_util.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WaitFor;

constexpr const char* kJob = R"(
[job]
name = "held"

[actors.only]
class = "test.none"
)";

// A daemon on its own thread, shut down (and joined) at scope exit.
class DaemonThread {
 public:
  explicit DaemonThread(const std::string& home) : socket_(DaemonSocketPath(home)) {
    DaemonOptions o;
    o.home = home;
    o.echo_logs = false;
    std::promise<void> ready;
    auto ready_f = ready.get_future();
    thread_ = std::thread([this, o, p = std::move(ready)]() mutable {
      status_ = RunDaemon(o, [&p] { p.set_value(); });
      if (!status_.ok()) p.set_value();
    });
    ready_f.wait();
  }
  ~DaemonThread() {
    Endpoint ep;
    ep.unix_path = socket_;
    ControlRequest shutdown;
    shutdown.kind = ControlRequest::Kind::kShutdown;
    (void)Call(ep, shutdown, 30s);
    thread_.join();
  }
  const Status& status() const { return status_; }

 private:
  const std::string socket_;
  std::thread thread_;
  Status status_;
};

TEST(DaemonTest, OneDaemonPerHomeAndTheSecondNamesTheFirst) {
  TempDir home;
  DaemonThread first(home.path());
  ASSERT_TRUE(first.status().ok()) << first.status().ToString();
  auto pid = ServerPid(DaemonSocketPath(home.path()));
  ASSERT_TRUE(pid.has_value());
  EXPECT_EQ(*pid, ::getpid());
  DaemonOptions o;
  o.home = home.path();
  o.echo_logs = false;
  Status second = RunDaemon(o);
  EXPECT_EQ(second.code(), StatusCode::kUnavailable);
  EXPECT_NE(second.message().find(fmt::format("another tandem daemon (pid {})", ::getpid())),
            std::string::npos)
      << second.message();
  EXPECT_TRUE(ServerAnswers(DaemonSocketPath(home.path())));  // the first keeps its socket
}

TEST(DaemonTest, StaleRunSocketsAreRemovedAtStart) {
  TempDir home;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // a pid that no longer exists
  const std::string dead = RunSocketPath(home.path(), child);
  const std::string alive = RunSocketPath(home.path(), ::getpid());
  std::ofstream(dead).put('x');
  std::ofstream(alive).put('x');
  std::ofstream(home.path() + "/run-notapid.sock").put('x');
  std::vector<std::string> removed = CleanStaleFiles(home.path());
  EXPECT_EQ(removed, std::vector<std::string>{dead});
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(home.path() + "/run-notapid.sock"));
}

// A job file that takes long to check must not freeze status. The check is
// held on a latch; status on another connection must still be answered.
TEST(DaemonTest, StatusIsAnsweredWhileASubmitIsChecked) {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  JobManager manager("daemon", /*echo_logs=*/false, /*log_reports=*/true, [&](const JobSpec&) -> Status {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, 60s, [&] { return release; });
    return InvalidArgumentError("held check released");
  });
  TempDir dir;
  ServerOptions so;
  so.unix_path = dir.path() + "/d.sock";
  auto server = ControlServer::Start(so, [&](ControlRequest r, ControlServer::Reply reply) {
    manager.HandleAsync(std::move(r), std::move(reply));
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Endpoint ep;
  ep.unix_path = so.unix_path;
  ControlRequest submit;
  submit.kind = ControlRequest::Kind::kSubmit;
  submit.path = dir.path() + "/held.toml";
  submit.text = kJob;
  std::future<Result<ControlResponse>> submitted =
      std::async(std::launch::async, [&] { return Call(ep, submit, 90s); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return entered; }));
  }
  ControlRequest status;
  status.kind = ControlRequest::Kind::kStatus;
  auto st = Call(ep, status, 20s);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(st.ok()) << "status blocked behind a submit: " << st.status().ToString();
  EXPECT_EQ(st->kind, ControlResponse::Kind::kJobs);
  auto sub = submitted.get();
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ(sub->kind, ControlResponse::Kind::kError);
  EXPECT_NE(sub->error.message().find("held check released"), std::string::npos);
  (*server)->Stop();
}

}  // namespace
}  // namespace tandem
