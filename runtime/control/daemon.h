// The tandem daemon: a JobManager behind a ControlServer on $TANDEM_HOME/tandem.sock (plus
// TCP and /metrics when asked), serving until a shutdown request. `tandem start` runs it.
// Thread-safety: RunDaemon blocks its caller; RequestDaemonShutdown is async-signal-unsafe
// and meant for a signal-watching thread.
#pragma once

#include <functional>
#include <string>

#include "runtime/core/status.h"

namespace tandem {

struct DaemonOptions {
  std::string home;         // TandemHome()
  int tcp_port = -1;        // -1: Unix socket only
  std::string tcp_host = "127.0.0.1";
  std::string token;        // required with tcp_port
  int metrics_port = -1;    // -1: no /metrics
  bool echo_logs = true;    // also write log lines to stderr
};

// Serves until a shutdown request (or RequestDaemonShutdown), then stops every job and waits
// for them. `on_ready` runs once the socket accepts connections. Unavailable when another
// daemon already answers on the socket.
Status RunDaemon(const DaemonOptions& options, const std::function<void()>& on_ready = nullptr);

// Asks the running RunDaemon of this process (if any) to shut down, as a shutdown request does.
void RequestDaemonShutdown();

// True when a control server answers a ping on `socket_path`.
bool ServerAnswers(const std::string& socket_path);

}  // namespace tandem
