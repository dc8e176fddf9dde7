// ControlServer against real sockets (Unix and TCP loopback): what one client can make the
// server hold before it authenticates, connection limits, idle timeouts, token failures,
// accept() failures, and replies from other threads.
#include "runtime/control/server.h"

#include <sys/resource.h>
#include <fcntl.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/control/client.h"
#include "runtime/control/server_test_util.h"
#include "runtime/core/logging.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using testing::FrameHeader;
using testing::RawClient;
using testing::TempDir;
using testing::WaitFor;

// Answers pings; a submit's reply names the size of the text it carried.
ControlResponse Echo(const ControlRequest& req) {
  ControlResponse r;
  if (req.kind == ControlRequest::Kind::kSubmit) {
    r.kind = ControlResponse::Kind::kSubmitted;
    r.job_id = std::to_string(req.text.size());
    return r;
  }
  r.kind = ControlResponse::Kind::kPong;
  r.server = "test";
  return r;
}

struct Served {
  TempDir dir;
  std::unique_ptr<ControlServer> server;
  std::string sock() const { return dir.path() + "/s.sock"; }
  Endpoint unix_ep() const {
    Endpoint ep;
    ep.unix_path = sock();
    return ep;
  }
  Endpoint tcp_ep(std::string token) const {
    Endpoint ep;
    ep.tcp_port = server->tcp_port();
    ep.token = std::move(token);
    return ep;
  }
};

std::unique_ptr<Served> Serve(ServerLimits limits, bool tcp = false,
                              ControlServer::Handler handler = ControlServer::Inline(Echo)) {
  auto s = std::make_unique<Served>();
  ServerOptions o;
  o.unix_path = s->sock();
  o.limits = limits;
  if (tcp) {
    o.tcp_port = 0;
    o.token = "s3cret";
  }
  auto started = ControlServer::Start(o, std::move(handler));
  EXPECT_TRUE(started.ok()) << started.status().ToString();
  if (started.ok()) s->server = std::move(*started);
  return s;
}

bool Pings(const Endpoint& ep) {
  auto r = Call(ep, ControlRequest{}, 30s);
  return r.ok() && r->kind == ControlResponse::Kind::kPong;
}

size_t ResidentBytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// The slow-headers attack: headers announcing the largest frame, then silence. The server must
// not allocate what they announce: memory grows with bytes received, not bytes promised.
TEST(ControlServerTest, AnnouncedPayloadIsNotAllocatedBeforeItArrives) {
  ServerLimits lim;
  lim.max_pending_bytes = 1u << 30;  // the budget is not what stops this attack
  auto s = Serve(lim);
  ASSERT_TRUE(s->server);
  const size_t before = ResidentBytes();
  std::vector<RawClient> idle;
  constexpr int kConnections = 16;
  for (int i = 0; i < kConnections; ++i) {
    idle.push_back(RawClient::Unix(s->sock()));
    ASSERT_TRUE(idle.back().Send(FrameHeader(kMaxFrameBytes) + "x"));
  }
  // Every header has been read once each connection has charged its first chunk.
  ASSERT_TRUE(WaitFor([&] { return s->server->Stats().pending_bytes >= kConnections * 1024u; }))
      << s->server->Stats().pending_bytes;
  EXPECT_LE(s->server->Stats().pending_bytes, kConnections * (64u << 10));
  const size_t grown = ResidentBytes() - std::min(before, ResidentBytes());
  EXPECT_LT(grown, 64u << 20) << "16 idle connections announcing 16 MiB each took "
                              << (grown >> 20) << " MiB";
  EXPECT_TRUE(Pings(s->unix_ep()));  // and the server still answers
}

TEST(ControlServerTest, RequestsOverThePerConnectionLimitAreRefused) {
  ServerLimits lim;
  lim.max_request_bytes = 100u << 10;
  auto s = Serve(lim);
  RawClient c = RawClient::Unix(s->sock());
  ASSERT_TRUE(c.Send(FrameHeader(200u << 10)));
  auto r = c.ReadReply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ControlResponse::Kind::kError);
  EXPECT_NE(r->error.message().find("exceeds the limit of 102400 bytes"), std::string::npos)
      << r->error.message();
  EXPECT_TRUE(c.ClosedByPeer());
}

TEST(ControlServerTest, PendingBytesOverTheServerLimitAreRefused) {
  ServerLimits lim;
  lim.max_request_bytes = 256u << 10;
  lim.max_pending_bytes = 256u << 10;
  auto s = Serve(lim);
  RawClient a = RawClient::Unix(s->sock());
  ASSERT_TRUE(a.Send(FrameHeader(250u << 10) + std::string(200u << 10, 'a')));
  ASSERT_TRUE(WaitFor([&] { return s->server->Stats().pending_bytes >= (200u << 10); }));
  RawClient b = RawClient::Unix(s->sock());
  ASSERT_TRUE(b.Send(FrameHeader(100u << 10) + "b"));
  auto r = b.ReadReply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ControlResponse::Kind::kError);
  EXPECT_EQ(r->error.code(), StatusCode::kUnavailable);
  EXPECT_NE(r->error.message().find("too many request bytes pending"), std::string::npos)
      << r->error.message();
  a.Close();  // its bytes are returned to the budget
  EXPECT_TRUE(WaitFor([&] { return s->server->Stats().pending_bytes == 0; }));
  EXPECT_TRUE(Pings(s->unix_ep()));
}

TEST(ControlServerTest, TcpBuffersNothingLargeBeforeTheToken) {
  auto s = Serve(ServerLimits{}, /*tcp=*/true);
  ASSERT_GT(s->server->tcp_port(), 0);
  RawClient c = RawClient::Tcp(s->server->tcp_port());
  ASSERT_TRUE(c.Send(FrameHeader(1u << 20) + std::string(1000, 'x')));
  auto r = c.ReadReply();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->unauthenticated);
  EXPECT_NE(r->error.message().find("at most 65536 bytes"), std::string::npos)
      << r->error.message();
  EXPECT_TRUE(c.ClosedByPeer());
  EXPECT_EQ(s->server->Stats().pending_bytes, 0u);

  // The client authenticates with a ping first when its request is large.
  ControlRequest big;
  big.kind = ControlRequest::Kind::kSubmit;
  big.text = std::string(300u << 10, 'j');
  auto ok = Call(s->tcp_ep("s3cret"), big, 30s);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->job_id, std::to_string(300u << 10));
  auto wrong = Call(s->tcp_ep("nope"), big, 30s);
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  EXPECT_EQ(wrong->kind, ControlResponse::Kind::kError);
  EXPECT_TRUE(wrong->unauthenticated);
}

TEST(ControlServerTest, FailedTokenChecksAreLoggedAndSlowedDown) {
  std::mutex mu;
  std::vector<std::string> lines;
  log::SetSink([&](log::Level, std::string_view l) {
    std::lock_guard<std::mutex> lock(mu);
    lines.emplace_back(l);
  });
  ServerLimits lim;
  lim.auth_failure_delay = 100ms;
  auto s = Serve(lim, /*tcp=*/true);
  std::vector<double> seconds;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = Call(s->tcp_ep("wrong"), ControlRequest{}, 30s);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->unauthenticated);
  }
  // 100, 200, 400, 800 ms: each failure waits at least twice as long as the one before.
  EXPECT_GE(seconds[0], 0.1);
  EXPECT_GE(seconds[3], 0.8);
  EXPECT_TRUE(Pings(s->tcp_ep("s3cret")));  // the right token is not delayed
  EXPECT_EQ(s->server->Stats().auth_failures, 4u);
  s->server->Stop();
  log::SetSink(nullptr);
  int logged = 0;
  for (const auto& l : lines)
    if (l.find("token check failed for a request from 127.0.0.1:") != std::string::npos) ++logged;
  EXPECT_EQ(logged, 4);
}

TEST(ControlServerTest, ConnectionsOverTheLimitAreRefusedWithAReason) {
  ServerLimits lim;
  lim.max_connections = 4;
  auto s = Serve(lim);
  std::vector<RawClient> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(RawClient::Unix(s->sock()));
  ASSERT_TRUE(WaitFor([&] { return s->server->Stats().connections == 4; }));
  RawClient extra = RawClient::Unix(s->sock());
  auto r = extra.ReadReply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.code(), StatusCode::kUnavailable);
  EXPECT_NE(r->error.message().find("4 connections open"), std::string::npos);
  EXPECT_EQ(s->server->Stats().refused_connections, 1u);
  idle.pop_back();
  EXPECT_TRUE(WaitFor([&] { return Pings(s->unix_ep()); }));
}

TEST(ControlServerTest, PeersWithoutTheTokenCannotHoldTheTcpSlots) {
  // 8 TCP slots, at most 2 of them waiting for a token. Silent peers once held all 8.
  ServerLimits lim;
  lim.max_connections = 8;
  auto s = Serve(lim, /*tcp=*/true);
  std::vector<RawClient> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(RawClient::Tcp(s->server->tcp_port()));
  ASSERT_TRUE(WaitFor([&] { return s->server->Stats().evicted_unauthenticated == 6; }));
  EXPECT_EQ(s->server->Stats().unauthenticated, 2u);
  EXPECT_TRUE(silent[0].ClosedByPeer());  // the oldest made room first
  // A client with the token gets in, and its connection no longer counts as waiting.
  EXPECT_TRUE(Pings(s->tcp_ep("s3cret")));
  EXPECT_TRUE(silent[6].ClosedByPeer());  // the ping's connection evicted the oldest left
  EXPECT_TRUE(Pings(s->unix_ep()));
}

TEST(ControlServerTest, IdleAndSlowConnectionsAreClosed) {
  ServerLimits lim;
  lim.idle_timeout = 300ms;
  auto s = Serve(lim, /*tcp=*/true);
  RawClient silent = RawClient::Unix(s->sock());
  RawClient partial = RawClient::Tcp(s->server->tcp_port());
  ASSERT_TRUE(partial.Send("TND"));
  RawClient slow = RawClient::Unix(s->sock());
  ASSERT_TRUE(slow.Send(FrameHeader(1000)));
  // Trickling bytes does not extend the deadline: the request must be complete in time.
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - start < testing::kDeadline) {
    closed = !slow.Send("z") || slow.ClosedByPeer(std::chrono::seconds(0));
    // The trickle is what is under test (a slow client that keeps sending): any pace below
    // the 300 ms idle timeout works, and a slower machine only trickles less often.
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(closed);
  EXPECT_TRUE(silent.ClosedByPeer());
  EXPECT_TRUE(partial.ClosedByPeer());
  EXPECT_TRUE(WaitFor([&] { return s->server->Stats().connections == 0; }));
  EXPECT_TRUE(Pings(s->unix_ep()));
}

double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// With no file descriptor left, accept() fails with EMFILE while the connection stays in
// the backlog: the listener must back off, not spin, and take it once descriptors free up.
TEST(ControlServerTest, AcceptFailuresBackOffAndRecover) {
  auto s = Serve(ServerLimits{});
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  std::vector<int> fillers;
  int extra = -1;
  {
    rlimit low = old;
    low.rlim_cur = 256;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    while (true) {
      int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      fillers.push_back(fd);
    }
    ASSERT_FALSE(fillers.empty());
    ::close(fillers.back());  // room for exactly the client's socket
    fillers.pop_back();
  }
  RawClient c = RawClient::Unix(s->sock());
  ASSERT_GE(c.fd(), 0);
  ASSERT_TRUE(WaitFor([&] { return s->server->Stats().accept_failures > 0; }));
  const double cpu0 = ProcessCpuSeconds();
  const auto wall0 = std::chrono::steady_clock::now();
  // The window is what is under test: CPU used over wall time while accept() keeps failing
  // (a ratio, so a loaded machine that stretches the window does not change the verdict).
  std::this_thread::sleep_for(1500ms);
  const double cpu = ProcessCpuSeconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const uint64_t failures = s->server->Stats().accept_failures;
  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  (void)extra;
  EXPECT_LT(cpu, 0.25 * wall) << "the server spun on accept()";
  EXPECT_LT(failures, 50u);
  // Descriptors are back: the waiting connection is accepted and answered.
  ControlRequest ping;
  ASSERT_TRUE(c.Send(EncodeRequest(ping)));
  auto r = c.ReadReply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ControlResponse::Kind::kPong);
}

// A handler may answer later from another thread; meanwhile the I/O thread serves others.
TEST(ControlServerTest, DeferredRepliesDoNotBlockOtherConnections) {
  std::mutex mu;
  std::vector<ControlServer::Reply> held;
  auto handler = [&](ControlRequest req, ControlServer::Reply reply) {
    if (req.kind == ControlRequest::Kind::kSubmit) {
      std::lock_guard<std::mutex> lock(mu);
      held.push_back(std::move(reply));
      return;
    }
    reply(Echo(req));
  };
  auto s = Serve(ServerLimits{}, false, handler);
  ControlRequest submit;
  submit.kind = ControlRequest::Kind::kSubmit;
  submit.text = "abc";
  Result<ControlResponse> submitted = InternalError("not yet");
  std::thread client([&] { submitted = Call(s->unix_ep(), submit, 60s); });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !held.empty();
  }));
  EXPECT_TRUE(Pings(s->unix_ep()));
  std::thread replier([&] {
    std::lock_guard<std::mutex> lock(mu);
    held.front()(Echo(submit));
    held.front()(Echo(ControlRequest{}));  // a second reply is ignored
  });
  replier.join();
  client.join();
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  EXPECT_EQ(submitted->job_id, "3");
}

// A reply that comes after Stop() is dropped, not sent through a destroyed io_context.
TEST(ControlServerTest, ReplyAfterStopIsDropped) {
  std::mutex mu;
  std::vector<ControlServer::Reply> held;
  auto s = Serve(ServerLimits{}, false, [&](ControlRequest, ControlServer::Reply reply) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(std::move(reply));
  });
  RawClient c = RawClient::Unix(s->sock());
  ASSERT_TRUE(c.Send(EncodeRequest(ControlRequest{})));
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !held.empty();
  }));
  s->server.reset();
  std::lock_guard<std::mutex> lock(mu);
  held.front()(Echo(ControlRequest{}));  // must not crash
}

TEST(ControlServerTest, LimitsAreChecked) {
  ServerLimits lim;
  lim.max_connections = 0;
  EXPECT_EQ(lim.Check().code(), StatusCode::kInvalidArgument);
  lim = ServerLimits{};
  lim.max_pending_bytes = lim.max_request_bytes - 1;
  EXPECT_NE(lim.Check().message().find("max_pending_bytes"), std::string::npos);
  lim = ServerLimits{};
  lim.idle_timeout = Duration::zero();
  EXPECT_EQ(lim.Check().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ServerLimits{}.Check().ok());
}

}  // namespace
}  // namespace tandem
