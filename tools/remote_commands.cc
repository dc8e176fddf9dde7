// The commands that talk to a control server: submit, stop, shutdown, status, list, logs.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/job/job_spec.h"
#include "runtime/job/job_status.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/progress/progress_line.h"

namespace tandem::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void OnInterrupt(int) { g_interrupted = 1; }

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Polls the job's status, printing progress, until it ends; its exit code.
int FollowJob(const Common& c, const Endpoint& ep, const std::string& id) {
  std::signal(SIGINT, OnInterrupt);
  const bool tty = StdoutIsTty();
  std::string last_line;
  while (!g_interrupted) {
    ControlRequest req;
    req.kind = ControlRequest::Kind::kStatus;
    req.job = id;
    auto r = Ask(c, ep, req);
    if (!r.ok()) return Fail(c, "submit", r.status(), CodeFor(r.status()));
    if (!c.json) EscapeForTerminal(r->jobs);
    const JobStatus& st = r->jobs.front();
    if (st.finished()) {
      if (tty) std::printf("\r\033[K");
      std::printf("%s\n", c.json ? JobStatusToJson(st).c_str() : FormatJobStatus(st).c_str());
      return st.state == "succeeded" ? kExitOk : kExitFailed;
    }
    std::string line = FormatProgressLine(st, TerminalWidth(STDOUT_FILENO) - 1);
    if (tty) {
      std::printf("\r\033[K%s", line.c_str());
      std::fflush(stdout);
    }
    Sleep(tty ? 300 : 1000);
  }
  return kExitFailed;
}

}  // namespace

int Submit(const Common& c, const std::string& path, bool wait) {
  auto text = ReadJobFile(path);  // size-capped: /dev/zero or a directory is refused here
  if (!text.ok()) return Fail(c, "submit", text.status(), kExitUsage);
  auto ep = FindServer(c, /*allow_run=*/false);
  if (!ep.ok()) return Fail(c, "submit", ep.status(), FindCode(ep.status()));
  ControlRequest req;
  req.kind = ControlRequest::Kind::kSubmit;
  req.path = std::filesystem::absolute(path).string();
  req.text = std::move(*text);
  bool unauthenticated = false;
  auto r = Ask(c, *ep, req, &unauthenticated);
  if (!r.ok()) {
    // A job file the daemon refuses is bad usage (2); a refused token is a refusal (1).
    int code = r.status().code() == StatusCode::kInvalidArgument && !unauthenticated
                   ? kExitUsage
                   : CodeFor(r.status());
    return Fail(c, "submit", r.status(), code);
  }
  if (!wait || !c.json) {
    std::printf(c.json ? "{\"job\": \"%s\"}\n" : "%s\n", r->job_id.c_str());
    std::fflush(stdout);
  }
  return wait ? FollowJob(c, *ep, r->job_id) : kExitOk;
}

int Stop(const Common& c, const std::string& job) {
  auto ep = FindServer(c, /*allow_run=*/true);
  if (!ep.ok()) return Fail(c, "stop", ep.status(), FindCode(ep.status()));
  ControlRequest req;
  req.kind = ControlRequest::Kind::kStop;
  req.job = job;
  auto r = Ask(c, *ep, req);
  if (!r.ok()) return Fail(c, "stop", r.status(), CodeFor(r.status()));
  std::printf(c.json ? "{\"stopping\": \"%s\"}\n" : "stopping %s\n", job.c_str());
  return kExitOk;
}

int Shutdown(const Common& c) {
  auto ep = FindServer(c, /*allow_run=*/false);
  if (!ep.ok()) return Fail(c, "shutdown", ep.status(), FindCode(ep.status()));
  ControlRequest req;
  req.kind = ControlRequest::Kind::kShutdown;
  auto r = Ask(c, *ep, req);
  if (!r.ok()) return Fail(c, "shutdown", r.status(), CodeFor(r.status()));
  std::printf(c.json ? "{\"shutdown\": true}\n" : "daemon shutting down\n");
  return kExitOk;
}

int ShowStatus(const Common& c, const std::string& job, bool watch) {
  auto ep = FindServer(c, /*allow_run=*/true);
  if (!ep.ok()) return Fail(c, "status", ep.status(), FindCode(ep.status()));
  std::signal(SIGINT, OnInterrupt);
  const bool tty = StdoutIsTty();
  do {
    ControlRequest req;
    req.kind = ControlRequest::Kind::kStatus;
    req.job = job;
    auto r = Ask(c, *ep, req);
    if (!r.ok()) return Fail(c, "status", r.status(), CodeFor(r.status()));
    if (!c.json) EscapeForTerminal(r->jobs);
    std::string out;
    if (c.json) {
      out = job.empty() ? JobListToJson(r->jobs) : JobStatusToJson(r->jobs.front());
    } else if (!job.empty() || r->jobs.size() == 1) {
      out = FormatJobStatus(r->jobs.front());
    } else {
      out = r->jobs.empty() ? "no jobs\n" : FormatJobList(r->jobs);
    }
    if (watch && tty) std::printf("\033[H\033[2J");
    std::printf("%s%s", out.c_str(), c.json ? "\n" : "");
    std::fflush(stdout);
    bool all_done = true;
    for (const auto& j : r->jobs) all_done = all_done && j.finished();
    if (!watch || all_done) break;
    Sleep(1000);
  } while (!g_interrupted);
  return kExitOk;
}

int List(const Common& c, const std::string& what) {
  auto ep = FindServer(c, /*allow_run=*/true);
  if (!ep.ok()) return Fail(c, "list", ep.status(), FindCode(ep.status()));
  ControlRequest req;
  req.kind = ControlRequest::Kind::kStatus;
  auto r = Ask(c, *ep, req);
  if (!r.ok()) return Fail(c, "list", r.status(), CodeFor(r.status()));
  if (c.json) {
    nlohmann::json all = nlohmann::json::parse(JobListToJson(r->jobs));
    nlohmann::json out = nlohmann::json::array();
    for (auto& j : all) {
      if (what == "jobs") {
        j.erase("actors");
        j.erase("channels");
        j.erase("stages");
        j.erase("profile_table");
        out.push_back(j);
      } else {
        for (auto& a : j["actors"]) {
          a["job"] = j["id"];
          out.push_back(a);
        }
      }
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    EscapeForTerminal(r->jobs);
    std::printf("%s", what == "jobs" ? FormatJobList(r->jobs).c_str() : FormatActorList(r->jobs).c_str());
  }
  return kExitOk;
}

int Logs(const Common& c, const std::string& job, const std::string& actor, bool follow) {
  auto ep = FindServer(c, /*allow_run=*/true);
  if (!ep.ok()) return Fail(c, "logs", ep.status(), FindCode(ep.status()));
  std::signal(SIGINT, OnInterrupt);
  uint64_t after = 0;
  while (!g_interrupted) {
    ControlRequest req;
    req.kind = ControlRequest::Kind::kLogs;
    req.job = job;
    req.actor = actor;
    req.after = after;
    auto r = Ask(c, *ep, req);
    if (!r.ok()) return Fail(c, "logs", r.status(), CodeFor(r.status()));
    for (const LogLine& l : r->lines) {
      if (c.json) {
        nlohmann::json j = {{"seq", l.seq}, {"actor", l.actor}, {"text", l.text}};
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      } else {
        std::printf("%s\n", EscapeControlKeepLines(l.text).c_str());
      }
    }
    std::fflush(stdout);
    const bool more = r->last != after;
    after = r->last;
    if (more) continue;  // drain what is there before deciding to wait or stop
    if (!follow || r->finished) break;
    Sleep(300);
  }
  return kExitOk;
}

}  // namespace tandem::cli
