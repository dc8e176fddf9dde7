// ControlServer: serves control requests (messages.h) on a Unix socket and, when asked, on a
// TCP port that requires a token; optionally a Prometheus text endpoint (GET /metrics).
//
// Each connection carries any number of request frames, answered in order. A bad frame
// (wrong magic, over kMaxFrameBytes, undecodable payload) gets an error reply and the
// connection is closed; a TCP request without the right token gets an error reply. Neither
// affects other connections. The handler runs on the server's I/O thread and must return
// promptly (long work belongs on other threads: the job manager's).
//
// Thread-safety: Start/Stop from one owner thread; the handler and the metrics function are
// called on the server's I/O thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/control/messages.h"
#include "runtime/core/status.h"

namespace tandem {

struct ServerOptions {
  std::string unix_path;               // "" for none
  int tcp_port = -1;                   // -1: no TCP; 0: any free port
  std::string tcp_host = "127.0.0.1";
  std::string token;                   // required on TCP; must be non-empty when TCP is on
  int metrics_port = -1;               // -1: no /metrics endpoint; 0: any free port
  std::string metrics_host = "127.0.0.1";
};

class ControlServer {
 public:
  using Handler = std::function<ControlResponse(const ControlRequest&)>;
  using MetricsFn = std::function<std::string()>;

  // Binds every endpoint and starts the I/O thread. A stale socket file at unix_path is
  // replaced (callers check first that no live server owns it); the new one is made 0600.
  static Result<std::unique_ptr<ControlServer>> Start(ServerOptions options, Handler handler,
                                                      MetricsFn metrics = nullptr);
  ~ControlServer();  // Stop()
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // The bound ports (useful with port 0), or -1.
  int tcp_port() const;
  int metrics_port() const;
  // Closes every endpoint and connection and joins the I/O thread. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit ControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
