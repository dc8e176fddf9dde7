// One process per node on 127.0.0.1: cluster_test_node started N times. Join and
// placement, the key-value service and barriers, the cross-process gradient average
// (bitwise), refusals (job hash, version, token), and a node killed (SIGKILL) or frozen
// (SIGSTOP) being noticed by every other node within the bound, naming it.
//
// No fixed ports (the head binds port 0 and prints it) and no sleeps: the test blocks on
// the children's output lines with a deadline.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

// A started cluster_test_node: its pid and its stdout, read line by line.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      std::vector<char*> argv;
      static std::string exe = TANDEM_CLUSTER_TEST_NODE;
      argv.push_back(exe.data());
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(exe.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      kill(pid_, SIGCONT);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  pid_t pid() const { return pid_; }

  // The next line, or "" at EOF or after `within`.
  std::string Line(Clock::duration within = seconds(60)) {
    const auto deadline = Clock::now() + within;
    while (true) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || eof_) return "";
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(fd_, chunk, sizeof(chunk));
      if (n <= 0) eof_ = true;
      else buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Waits for the exit (killing it after `within`); returns the exit code, or -signal.
  int Wait(Clock::duration within = seconds(60)) {
    const auto deadline = Clock::now() + within;
    while (Line(deadline - Clock::now()) != "" || !eof_) {
      if (Clock::now() >= deadline) break;
    }
    if (!eof_) kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
  bool reaped_ = false;
};

std::vector<std::string> Args(const std::string& scenario, int rank, int nodes, int port,
                              std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {scenario, "--rank", std::to_string(rank), "--nodes",
                                std::to_string(nodes), "--port", std::to_string(port)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Starts rank 0 (the head) and returns its port.
int StartHead(std::vector<std::unique_ptr<Child>>* kids, const std::string& scenario, int nodes,
              std::vector<std::string> extra = {}) {
  kids->push_back(std::make_unique<Child>(Args(scenario, 0, nodes, 0, extra)));
  const std::string line = kids->back()->Line();
  EXPECT_TRUE(StartsWith(line, "PORT ")) << "rank 0 said: " << line;
  return StartsWith(line, "PORT ") ? std::stoi(line.substr(5)) : 0;
}

TEST(ClusterProcessTest, ThreeNodesJoinShareKeysAndMeet) {
  std::vector<std::unique_ptr<Child>> kids;
  const int port = StartHead(&kids, "join", 3);
  ASSERT_GT(port, 0);
  for (int r = 1; r < 3; ++r) kids.push_back(std::make_unique<Child>(Args("join", r, 3, port)));
  // Each node runs its own two of the six workers.
  const char* expect[] = {"JOINED workers 0,1", "JOINED workers 2,3", "JOINED workers 4,5"};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(kids[r]->Line(), expect[r]) << "node " << r;
  for (int r = 0; r < 3; ++r) EXPECT_EQ(kids[r]->Line(), "OK") << "node " << r;
  for (int r = 0; r < 3; ++r) EXPECT_EQ(kids[r]->Wait(), 0) << "node " << r;
}

TEST(ClusterProcessTest, GlooAverageIsBitwiseTheInProcessOne) {
  std::vector<std::unique_ptr<Child>> kids;
  const int port = StartHead(&kids, "gloo", 3);
  ASSERT_GT(port, 0);
  for (int r = 1; r < 3; ++r) kids.push_back(std::make_unique<Child>(Args("gloo", r, 3, port)));
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(StartsWith(kids[r]->Line(), "JOINED")) << r;
  for (int r = 0; r < 3; ++r) EXPECT_EQ(kids[r]->Line(), "OK") << "node " << r;
  for (int r = 0; r < 3; ++r) EXPECT_EQ(kids[r]->Wait(), 0) << "node " << r;
}

// A node whose job file differs is refused, naming it and both hashes; so is the cluster.
TEST(ClusterProcessTest, JobHashMismatchIsRefusedNamingTheNode) {
  std::vector<std::unique_ptr<Child>> kids;
  const int port = StartHead(&kids, "join", 2, {"--job-hash", "aaaa"});
  ASSERT_GT(port, 0);
  kids.push_back(std::make_unique<Child>(Args("join", 1, 2, port, {"--job-hash", "bbbb"})));
  const std::string bad = kids[1]->Line();
  EXPECT_NE(bad.find("node 1 (testhost1) has job file hash bbbb but the head has aaaa"),
            std::string::npos) << bad;
  const std::string head = kids[0]->Line();
  EXPECT_NE(head.find("node 1 (testhost1)"), std::string::npos) << head;
  EXPECT_EQ(kids[1]->Wait(), 1);
  EXPECT_EQ(kids[0]->Wait(), 1);
}

TEST(ClusterProcessTest, VersionMismatchIsRefusedNamingTheNode) {
  std::vector<std::unique_ptr<Child>> kids;
  const int port = StartHead(&kids, "join", 2, {"--version", "0.1.0 (abc)"});
  ASSERT_GT(port, 0);
  kids.push_back(std::make_unique<Child>(Args("join", 1, 2, port, {"--version", "0.2.0"})));
  const std::string bad = kids[1]->Line();
  EXPECT_NE(bad.find("node 1 (testhost1) runs tandem '0.2.0' but the head runs '0.1.0 (abc)'"),
            std::string::npos) << bad;
  EXPECT_EQ(kids[1]->Wait(), 1);
  EXPECT_EQ(kids[0]->Wait(), 1);
}

// A wrong token is refused before the head sees the join; the right node then completes
// the cluster.
TEST(ClusterProcessTest, WrongTokenIsRefused) {
  std::vector<std::unique_ptr<Child>> kids;
  const int port = StartHead(&kids, "join", 2);
  ASSERT_GT(port, 0);
  kids.push_back(std::make_unique<Child>(Args("join", 1, 2, port, {"--token", "guess"})));
  const std::string bad = kids[1]->Line();
  EXPECT_NE(bad.find("refused this node's token"), std::string::npos) << bad;
  EXPECT_EQ(kids[1]->Wait(), 1);
  kids.push_back(std::make_unique<Child>(Args("join", 1, 2, port)));
  EXPECT_EQ(kids[0]->Line(), "JOINED workers 0,1");
  EXPECT_EQ(kids[2]->Line(), "JOINED workers 2,3");
  EXPECT_EQ(kids[0]->Line(), "OK");
  EXPECT_EQ(kids[2]->Line(), "OK");
  EXPECT_EQ(kids[2]->Wait(), 0);
  EXPECT_EQ(kids[0]->Wait(), 0);
}

// One node is killed (or frozen) after joining: every other node's failure callback fires
// within node_timeout plus slack, naming the lost node (or the head when it is node 0).
void LoseNode(int signal, int victim) {
  constexpr int kTimeoutMs = 2000;
  const std::vector<std::string> fast = {"--heartbeat-ms", "100", "--node-timeout-ms",
                                         std::to_string(kTimeoutMs)};
  std::vector<std::unique_ptr<Child>> kids;
  const int port = StartHead(&kids, "hold", 3, fast);
  ASSERT_GT(port, 0);
  for (int r = 1; r < 3; ++r)
    kids.push_back(std::make_unique<Child>(Args("hold", r, 3, port, fast)));
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(StartsWith(kids[r]->Line(), "JOINED")) << r;
  const std::string expect = victim == 0
                                 ? "the cluster head (node 0 at 127.0.0.1:"
                                 : "node 2 (testhost2) was not heard from";
  const auto t0 = Clock::now();
  ASSERT_EQ(kill(kids[victim]->pid(), signal), 0);
  for (int r = 0; r < 3; ++r) {
    if (r == victim) continue;
    const std::string line = kids[r]->Line(seconds(60));
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_TRUE(StartsWith(line, "FAILED ")) << "node " << r << ": " << line;
    EXPECT_NE(line.find(expect), std::string::npos) << line;
    // Detection takes node_timeout; a loaded 2-core machine gets generous slack on top.
    EXPECT_LT(waited, kTimeoutMs / 1000.0 + 15) << line;
    EXPECT_GE(waited, kTimeoutMs / 1000.0 * 0.5) << line;
  }
  for (int r = 0; r < 3; ++r) {
    if (r != victim) EXPECT_EQ(kids[r]->Wait(), 0) << r;
  }
}

// A frozen rank leaves the others waiting inside a Gloo collective whose own timeout (120 s)
// is far off: the heartbeats' verdict (node_timeout) aborts it, naming the frozen node.
TEST(ClusterProcessTest, FrozenNodeEndsACollectiveWithinTheNodeTimeout) {
  constexpr int kTimeoutMs = 2000;
  const std::vector<std::string> fast = {"--heartbeat-ms", "100", "--node-timeout-ms",
                                         std::to_string(kTimeoutMs)};
  std::vector<std::unique_ptr<Child>> kids;
  const int port = StartHead(&kids, "gloo_stall", 3, fast);
  ASSERT_GT(port, 0);
  for (int r = 1; r < 3; ++r)
    kids.push_back(std::make_unique<Child>(Args("gloo_stall", r, 3, port, fast)));
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(StartsWith(kids[r]->Line(), "JOINED")) << r;
  for (int r = 0; r < 3; ++r) ASSERT_EQ(kids[r]->Line(), "READY") << r;
  const auto t0 = Clock::now();
  ASSERT_EQ(kill(kids[2]->pid(), SIGSTOP), 0);
  for (int r = 0; r < 2; ++r) {
    const std::string line = kids[r]->Line(seconds(100));
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_TRUE(StartsWith(line, "FAILED ")) << "node " << r << ": " << line;
    EXPECT_NE(line.find("node 2 (testhost2)"), std::string::npos) << line;
    EXPECT_LT(waited, kTimeoutMs / 1000.0 + 15) << line;
  }
  for (int r = 0; r < 2; ++r) EXPECT_EQ(kids[r]->Wait(), 0) << r;
}

TEST(ClusterProcessTest, KilledNodeIsNoticedByEveryOther) { LoseNode(SIGKILL, 2); }
TEST(ClusterProcessTest, FrozenNodeIsNoticedByEveryOther) { LoseNode(SIGSTOP, 2); }
TEST(ClusterProcessTest, KilledHeadIsNoticedByEveryNode) { LoseNode(SIGKILL, 0); }
TEST(ClusterProcessTest, FrozenHeadIsNoticedByEveryNode) { LoseNode(SIGSTOP, 0); }

}  // namespace
