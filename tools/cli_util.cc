#include "tools/cli_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/control/daemon.h"
#include "runtime/control/home.h"

namespace tandem::cli {

Result<std::string> Home(const Common& c) {
  if (!c.home.empty()) ::setenv("TANDEM_HOME", c.home.c_str(), 1);
  return TandemHome();
}

Result<Endpoint> FindServer(const Common& c, bool allow_run) {
  ASSIGN_OR_RETURN(std::string home, Home(c));
  Endpoint ep;
  if (c.tcp_port >= 0) {
    ep.host = c.host;
    ep.tcp_port = c.tcp_port;
    ASSIGN_OR_RETURN(ep.token, LoadToken(home, c.token_file));
    return ep;
  }
  if (!c.socket.empty()) {
    ep.unix_path = c.socket;
    return ep;
  }
  ep.unix_path = DaemonSocketPath(home);
  if (!allow_run || ServerAnswers(ep.unix_path)) return ep;
  for (const std::string& s : RunSocketPaths(home)) {
    if (ServerAnswers(s)) {
      ep.unix_path = s;
      return ep;
    }
  }
  return UnavailableError("no tandem daemon or `tandem run` answers in {} (start one with "
                          "`tandem start` or `tandem run JOB.toml`)", home);
}

Result<ControlResponse> Ask(const Common& c, const Endpoint& ep, ControlRequest req,
                            bool* unauthenticated) {
  auto timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(c.timeout_s));
  ASSIGN_OR_RETURN(ControlResponse r, Call(ep, std::move(req), timeout));
  if (unauthenticated != nullptr) *unauthenticated = r.unauthenticated;
  if (r.kind == ControlResponse::Kind::kError) return r.error;
  return r;
}

int CodeFor(const Status& st) {
  return st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kDeadlineExceeded
             ? kExitUnreachable
             : kExitFailed;
}

int Fail(const Common& c, const char* cmd, const Status& st, int code) {
  if (c.json) {
    nlohmann::json j = {{"error", {{"code", std::string(StatusCodeName(st.code()))},
                                   {"message", st.message()},
                                   {"exit_code", code}}}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  std::fprintf(stderr, "tandem %s: %s\n", cmd, EscapeControlKeepLines(st.ToString()).c_str());
  return code;
}

int FindCode(const Status& st) {
  return st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kNotFound
             ? kExitUsage
             : kExitUnreachable;
}

bool StdoutIsTty() { return ::isatty(STDOUT_FILENO) == 1; }

}  // namespace tandem::cli

namespace tandem::cli {

void EscapeForTerminal(std::vector<JobStatus>& jobs) {
  for (JobStatus& j : jobs) {
    for (std::string* s : {&j.id, &j.name, &j.state, &j.error, &j.verdict}) *s = EscapeControl(*s);
    for (ActorStatus& a : j.actors) {
      for (std::string* s : {&a.name, &a.class_name, &a.group, &a.state, &a.stage, &a.last_error})
        *s = EscapeControl(*s);
    }
    for (ChannelStatus& ch : j.channels) ch.name = EscapeControl(ch.name);
    for (StageStatus& st : j.stages) st.name = EscapeControl(st.name);
  }
}

}  // namespace tandem::cli
