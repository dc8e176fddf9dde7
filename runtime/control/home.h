// Where a tandem control server lives: $TANDEM_HOME (default ~/.tandem, mode 0700) holds the
// daemon's socket (tandem.sock), the sockets of running `tandem run` processes
// (run-PID.sock), the daemon's log, and optionally a token file for TCP access.
// Thread-safety: reentrant functions (they read the environment and the file system).
#pragma once

#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem {

// $TANDEM_HOME or $HOME/.tandem, created with mode 0700 if missing. InvalidArgument if it
// exists but is not a directory or is open to other users.
Result<std::string> TandemHome();

std::string DaemonSocketPath(const std::string& home);
std::string RunSocketPath(const std::string& home, int pid);
// The run-PID.sock files in `home`, newest first.
std::vector<std::string> RunSocketPaths(const std::string& home);

// Removes the run-PID.sock files in `home` whose process no longer exists (a `tandem run`
// killed with -9 leaves its socket behind), logging each; returns the removed paths.
std::vector<std::string> CleanStaleFiles(const std::string& home);

// The TCP token: $TANDEM_TOKEN, else the first line of `token_file` (default
// $TANDEM_HOME/token) if it exists; "" when neither does. InvalidArgument for a token file
// readable by group or others (it must be 0600).
Result<std::string> LoadToken(const std::string& home, const std::string& token_file = "");

}  // namespace tandem
