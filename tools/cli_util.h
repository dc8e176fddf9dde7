// Helpers shared by the CLI's commands: finding the server, calling it, printing errors.
// Thread-safety: called from main() only.
#pragma once

#include <string>
#include <vector>

#include "runtime/control/client.h"
#include "runtime/core/status.h"
#include "runtime/job/job_status.h"
#include "tools/commands.h"
#include "tools/terminal_text.h"

namespace tandem::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;
// `tandem run` stopped by a signal exits 128 + the signal (130 for Ctrl-C, 143 for SIGTERM).
inline constexpr int kExitSignalBase = 128;

// TANDEM_HOME after --home, created if needed.
Result<std::string> Home(const Common& c);
// The server to talk to: --tcp-port, else --socket, else the daemon's socket, else (when
// `allow_run` and no daemon answers) the newest `tandem run` process's socket.
Result<Endpoint> FindServer(const Common& c, bool allow_run);
// Calls the server; an error reply becomes a failed Result carrying the server's Status.
// *unauthenticated (when given) tells whether the server refused the token.
Result<ControlResponse> Ask(const Common& c, const Endpoint& ep, ControlRequest req,
                            bool* unauthenticated = nullptr);
// Prints "tandem CMD: message" (control characters escaped; or a JSON error object) and returns the exit code for it.
int Fail(const Common& c, const char* cmd, const Status& st, int code);
// Exit code for a Status from Ask: 3 for Unavailable/DeadlineExceeded, else 1.
int CodeFor(const Status& st);
// Exit code for a FindServer error: 2 for a bad home or token file, else 3.
int FindCode(const Status& st);
bool StdoutIsTty();
// Escapes every name and message of `jobs` that text output prints.
void EscapeForTerminal(std::vector<JobStatus>& jobs);

}  // namespace tandem::cli
