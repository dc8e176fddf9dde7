// ControlServer: serves control requests (messages.h) on a Unix socket and, when asked, on a
// TCP port that requires a token; optionally a Prometheus text endpoint (GET /metrics).
//
// Each connection carries any number of request frames, answered in order. A bad frame
// (wrong magic, over the size limit, undecodable payload) gets an error reply and the
// connection is closed; so does a TCP request without the right token. Neither affects
// other connections.
//
// What one client can hold (ServerLimits): payloads are read as they arrive, never allocated
// from the size a header announces; a connection buffers at most max_request_bytes and the
// whole server at most max_pending_bytes (a request over either gets an error reply). On TCP
// the first request of a connection must carry the token and be at most
// kMaxUnauthenticatedFrameBytes, so nothing large is buffered for a client that has not
// proven it holds the token. Each listener takes at most max_connections connections (more
// get an error reply and are closed); of the TCP ones at most max_unauthenticated may wait
// for their first request to prove the token (a newer one closes the oldest), so peers
// without it cannot hold every slot, and a connection that does not complete a request (or
// read its reply) within idle_timeout is closed. Failed token checks are logged and their
// replies delayed more the more of them there were in the last minute. When accept() fails
// (EMFILE) the listener backs off instead of spinning.
//
// The handler runs on the server's I/O thread and gets a Reply to call exactly once, there or
// later from any thread: slow work (parsing a submitted job) belongs on other threads, so
// the I/O thread keeps answering. A Reply called after Stop() is dropped.
//
// Thread-safety: Start/Stop from one owner thread; the handler and the metrics function are
// called on the server's I/O thread; a Reply may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "runtime/control/messages.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem {

struct ServerLimits {
  size_t max_connections = 64;             // per listener (Unix, TCP, metrics)
  // TCP control connections that have not yet sent a request with the token (at most a
  // quarter of max_connections): a new connection past it closes the oldest of them, so the
  // rest of the TCP slots stay for clients that have shown the token.
  size_t max_unauthenticated = 16;
  size_t max_request_bytes = kMaxFrameBytes;  // one request's payload
  size_t max_pending_bytes = 64u << 20;     // request bytes buffered over all connections
  Duration idle_timeout = std::chrono::seconds(30);  // to complete a request or read a reply
  Duration auth_failure_delay = std::chrono::milliseconds(100);  // doubles per recent failure
  Duration max_auth_failure_delay = std::chrono::seconds(5);

  // InvalidArgument naming the field for a zero or inconsistent limit.
  Status Check() const;
};

// Counters for `tandem status`-style views and tests.
struct ServerStats {
  size_t connections = 0;         // open control connections (Unix and TCP)
  size_t unauthenticated = 0;     // TCP ones of them that have not yet shown the token
  uint64_t evicted_unauthenticated = 0;  // closed to make room for a newer one
  size_t pending_bytes = 0;       // request bytes buffered now
  uint64_t refused_connections = 0;  // turned away at max_connections
  uint64_t accept_failures = 0;   // accept() errors (EMFILE, ...)
  uint64_t auth_failures = 0;     // failed TCP token checks
};

struct ServerOptions {
  std::string unix_path;               // "" for none
  int tcp_port = -1;                   // -1: no TCP; 0: any free port
  std::string tcp_host = "127.0.0.1";
  std::string token;                   // required on TCP; must be non-empty when TCP is on
  int metrics_port = -1;               // -1: no /metrics endpoint; 0: any free port
  std::string metrics_host = "127.0.0.1";
  ServerLimits limits;
};

class ControlServer {
 public:
  // Sends the reply to the request it was given for; call it exactly once, from any thread.
  using Reply = std::function<void(ControlResponse)>;
  using Handler = std::function<void(ControlRequest, Reply)>;
  using MetricsFn = std::function<std::string()>;

  // A Handler that answers every request at once on the I/O thread with `fn`'s response.
  static Handler Inline(std::function<ControlResponse(const ControlRequest&)> fn);

  // Binds every endpoint and starts the I/O thread. A stale socket file at unix_path is
  // replaced (callers check first that no live server owns it); the new one is made 0600.
  // max_connections is lowered (with a warning) to fit the process's open-file limit.
  static Result<std::unique_ptr<ControlServer>> Start(ServerOptions options, Handler handler,
                                                      MetricsFn metrics = nullptr);
  ~ControlServer();  // Stop()
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // The bound ports (useful with port 0), or -1.
  int tcp_port() const;
  int metrics_port() const;
  // The limits in force (after the open-file clamp).
  const ServerLimits& limits() const;
  // Taken on the I/O thread (the call waits for it); zeros after Stop().
  ServerStats Stats() const;
  // Closes every endpoint and connection and joins the I/O thread. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit ControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
