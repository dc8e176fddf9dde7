// Internal to ControlServer (server.cc, control_session.cc, metrics_session.cc): the state its
// connections share, and the helpers that enforce ServerLimits. Not installed.
//
// Thread-safety: ServerCore and ConnectionSlot are touched only on the server's I/O thread;
// ReplyGate is safe from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/control/asio.h"
#include "runtime/control/server.h"
#include "runtime/core/clock.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::control_internal {

namespace asio = boost::asio;

// Lets a Reply called on another thread reach the I/O thread while the server runs, and
// drops it after Stop().
class ReplyGate {
 public:
  explicit ReplyGate(asio::io_context* io) : io_(io) {}
  // Runs `fn` on the I/O thread; false (and `fn` dropped) once Close() was called.
  bool Post(std::function<void()> fn) EXCLUDES(mu_);
  void Close() EXCLUDES(mu_);

 private:
  std::mutex mu_;
  asio::io_context* io_ GUARDED_BY(mu_);
};

// Failed token checks in the last minute: how long to hold each failure's reply back, and
// whether to log it (every one of the first few, then one in 50 with the count).
class AuthFailures {
 public:
  struct Verdict {
    Duration delay{};
    size_t recent = 0;  // failures in the last minute, this one included
    bool log = false;
  };
  Verdict Record(TimePoint now, const ServerLimits& limits);

 private:
  std::deque<TimePoint> recent_;
};

// Counts one open connection of a listener while it lives.
class ConnectionSlot {
 public:
  explicit ConnectionSlot(size_t* count) : count_(count) { ++*count_; }
  ~ConnectionSlot() {
    if (count_ != nullptr) --*count_;
  }
  ConnectionSlot(ConnectionSlot&& o) noexcept : count_(o.count_) { o.count_ = nullptr; }
  ConnectionSlot& operator=(ConnectionSlot&&) = delete;
  ConnectionSlot(const ConnectionSlot&) = delete;

 private:
  size_t* count_;
};

enum ListenerId { kUnixListener = 0, kTcpListener = 1, kMetricsListener = 2, kListeners = 3 };

struct ServerCore {
  ServerLimits limits;
  ControlServer::Handler handler;
  ControlServer::MetricsFn metrics;
  std::string token;  // TCP only
  std::shared_ptr<ReplyGate> gate;
  size_t connections[kListeners] = {0, 0, 0};
  // TCP control connections before their token was checked, oldest first: each one's
  // closer, by the order it was accepted in.
  std::map<uint64_t, std::function<void()>> unauthenticated;
  uint64_t next_unauthenticated = 0;
  uint64_t evicted_unauthenticated = 0;
  size_t pending_bytes = 0;  // request bytes buffered over every connection
  uint64_t refused_connections = 0;
  uint64_t accept_failures = 0;
  uint64_t auth_failures_total = 0;
  AuthFailures auth_failures;
  // Sessions waiting for their handler's Reply (nothing else holds them meanwhile); cleared
  // when the server stops, while the io_context still exists.
  std::unordered_map<const void*, std::shared_ptr<void>> waiting;

  // Takes `n` bytes of the server's pending budget; false if that would pass the limit.
  bool Reserve(size_t n) {
    if (n > limits.max_pending_bytes - pending_bytes) return false;
    pending_bytes += n;
    return true;
  }
  void Release(size_t n) { pending_bytes -= n; }
};

// Starts serving one accepted control connection (control_session.cc). `needs_token`: TCP.
void StartControlSession(asio::local::stream_protocol::socket socket, ServerCore* core,
                         ConnectionSlot slot);
void StartControlSession(asio::ip::tcp::socket socket, ServerCore* core, ConnectionSlot slot);
// Starts serving one accepted metrics connection (metrics_session.cc).
void StartMetricsSession(asio::ip::tcp::socket socket, ServerCore* core, ConnectionSlot slot);

// Best effort, without blocking: writes `bytes` to a freshly accepted socket and closes it.
template <typename Socket>
void RefuseConnection(Socket& socket, const std::string& bytes) {
  boost::system::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(asio::buffer(bytes), ignored);
  socket.shutdown(Socket::shutdown_both, ignored);
  socket.close(ignored);
}

}  // namespace tandem::control_internal
