// ControlClient: sends one request to a control server (daemon or `tandem run`) and waits
// for its reply, over the Unix socket or TCP. Asio errors and timeouts come back as Status:
// Unavailable when nothing listens, DeadlineExceeded when the reply does not come in time.
// Thread-safety: Call is reentrant (each call has its own connection).
#pragma once

#include <string>

#include "runtime/control/messages.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem {

struct Endpoint {
  std::string unix_path;  // used when tcp_port < 0
  std::string host = "127.0.0.1";
  int tcp_port = -1;
  std::string token;      // sent with every request (checked on TCP only)

  std::string ToString() const;
};

// Connects, sends `req` (with the endpoint's token), reads one reply. An error reply is
// returned as a response of kind kError, not as a failed Result.
Result<ControlResponse> Call(const Endpoint& endpoint, ControlRequest req,
                             Duration timeout = std::chrono::seconds(30));

}  // namespace tandem
