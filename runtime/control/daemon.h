// The tandem daemon: a JobManager behind a ControlServer on $TANDEM_HOME/tandem.sock (plus
// TCP and /metrics when asked), serving until a shutdown request. `tandem start` runs it.
//
// One daemon per home: RunDaemon holds an exclusive lock on $TANDEM_HOME/daemon.lock while
// it serves, so two daemons started at once cannot both take the socket. At start it
// removes what a killed process left in the home (home.h: CleanStaleFiles) and logs it.
// Thread-safety: RunDaemon blocks its caller; RequestDaemonShutdown is async-signal-unsafe
// and meant for a signal-watching thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "runtime/control/server.h"
#include "runtime/core/status.h"

namespace tandem {

struct DaemonOptions {
  std::string home;         // TandemHome()
  int tcp_port = -1;        // -1: Unix socket only
  std::string tcp_host = "127.0.0.1";
  std::string token;        // required with tcp_port
  int metrics_port = -1;    // -1: no /metrics
  bool echo_logs = true;    // also write log lines to stderr
  ServerLimits limits;      // connections, pending bytes, idle timeout
};

// Serves until a shutdown request (or RequestDaemonShutdown), then stops every job and waits
// for them. `on_ready` runs once the socket accepts connections. Unavailable, naming the
// other daemon's pid when it answers, when another daemon holds the home.
Status RunDaemon(const DaemonOptions& options, const std::function<void()>& on_ready = nullptr);

// Asks the running RunDaemon of this process (if any) to shut down, as a shutdown request does.
void RequestDaemonShutdown();

// True when a control server answers a ping on `socket_path`.
bool ServerAnswers(const std::string& socket_path);
// The pid of the server answering a ping on `socket_path`, if one does.
std::optional<int64_t> ServerPid(const std::string& socket_path);

}  // namespace tandem
