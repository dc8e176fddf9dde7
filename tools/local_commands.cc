// The commands that run a runtime in this process: run, validate, start; and keys.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "runtime/control/daemon.h"
#include "runtime/control/home.h"
#include "runtime/control/job_manager.h"
#include "runtime/control/metrics.h"
#include "runtime/actor/plugin.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_spec_keys.h"
#include "runtime/job/runner.h"
#include "runtime/control/server.h"
#include "tools/cli_util.h"
#include "tools/cluster_run.h"
#include "tools/commands.h"
#include "tools/default_job.h"
#include "tools/progress/progress_line.h"

namespace tandem::cli {
namespace {

volatile std::sig_atomic_t g_signalled = 0;  // the signal that asked `run` to stop, or 0

void OnSignal(int sig) { g_signalled = sig; }

// Everything readable from `fd` until EOF.
std::string ReadAll(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// `tandem start`'s parent: reports success only when the daemon that answers is the child it
// started; when the child exits (another daemon won the race, a bad port, ...) it says why.
// `why_fd` is the read end of a pipe the child writes its error to before it exits.
int AwaitDaemon(const Common& c, pid_t pid, int why_fd, const std::string& socket,
                const std::string& log_path) {
  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<Duration>(
                                                 std::chrono::duration<double>(c.timeout_s));
  while (SteadyClock::now() < deadline) {
    int wstatus = 0;
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) {
      std::string why = ReadAll(why_fd);
      ::close(why_fd);
      return Fail(c, "start",
                  UnavailableError("the daemon (pid {}) exited at start: {}", pid,
                                   why.empty() ? "see " + log_path : why),
                  kExitFailed);
    }
    if (std::optional<int64_t> answering = ServerPid(socket); answering && *answering == pid) {
      ::close(why_fd);
      if (c.json) {
        std::printf("{\"pid\": %d, \"socket\": \"%s\"}\n", pid, socket.c_str());
      } else {
        std::printf("tandem daemon started (pid %d), socket %s, log %s\n", pid, socket.c_str(),
                    log_path.c_str());
      }
      return kExitOk;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::close(why_fd);
  return Fail(c, "start", DeadlineExceededError("the daemon (pid {}) did not answer; see {}", pid,
                                                log_path),
              kExitUnreachable);
}

// The job file's exact text (the embedded default job's when `path` is empty): a cluster
// head compares its hash across nodes.
Result<std::string> JobText(const std::string& path) {
  if (path.empty()) return std::string(kDefaultJobText);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("{}: cannot read the job file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<JobSpec> LoadJob(const std::string& path) {
  if (path.empty()) return ParseJobText(kDefaultJobText, kDefaultJobName);
  return LoadJobFile(std::filesystem::absolute(path).string());
}

}  // namespace

int Validate(const Common& c, const std::string& path) {
  auto job = LoadJobFile(path);
  if (!job.ok()) return Fail(c, "validate", job.status(), kExitUsage);
  if (Status st = CheckStoreFitsMachine(*job); !st.ok())
    return Fail(c, "validate", st, kExitUsage);
  std::vector<std::string> notes;
  if (Status st = JobRunner::Check(*job, &notes); !st.ok())
    return Fail(c, "validate", st, kExitUsage);
  for (const std::string& n : notes) std::fprintf(stderr, "tandem validate: note: %s\n", n.c_str());
  if (c.json) {
    std::printf("{\"ok\": true, \"channels\": %zu, \"actor_groups\": %zu}\n", job->channels.size(),
                job->actors.size());
  } else {
    std::printf("%s: ok (%zu channels, %zu actor groups)\n", path.c_str(), job->channels.size(),
                job->actors.size());
  }
  return kExitOk;
}

int Keys(const Common& c, const std::vector<std::string>& plugins) {
  for (const std::string& p : plugins) {
    auto loaded = LoadPlugin(p);
    if (!loaded.ok()) return Fail(c, "keys", loaded.status(), kExitUsage);
  }
  std::printf("%s", KeyReferenceMarkdown().c_str());
  return kExitOk;
}

int Run(const Common& c, const std::string& path, int metrics_port, const ClusterFlags& flags) {
  auto job = LoadJob(path);
  if (!job.ok()) return Fail(c, "run", job.status(), kExitUsage);
  if (Status st = CheckStoreFitsMachine(*job); !st.ok()) return Fail(c, "run", st, kExitUsage);
  auto home = Home(c);
  if (!home.ok()) return Fail(c, "run", home.status(), kExitUsage);
  // A job on several nodes: join the cluster (rank 0 serves the head); the head checks that
  // the whole job fits the nodes, so this node only checks the job file itself.
  auto text = JobText(path);
  if (!text.ok()) return Fail(c, "run", text.status(), kExitUsage);
  auto part = ClusterPart::Join(flags, *job, *text, *home, c.token_file);
  if (!part.ok()) return Fail(c, "run", part.status(), kExitFailed);
  if (Status st = *part ? JobRunner::CheckSpec(*job) : JobRunner::Check(*job); !st.ok())
    return Fail(c, "run", st, kExitUsage);
  const bool tty = StdoutIsTty() && !c.json;
  CleanStaleFiles(*home);
  JobManager manager("run", /*echo_logs=*/!tty, /*log_reports=*/false);
  ServerOptions so;
  so.unix_path = RunSocketPath(*home, static_cast<int>(::getpid()));
  so.metrics_port = metrics_port;
  // On several nodes statuses and metrics name the node, and the head shows every node and
  // answers logs of actors on other nodes (tools/cluster_run.h).
  ClusterPart* cluster_part = *part ? part->get() : nullptr;
  auto handle = [&manager, cluster_part](const ControlRequest& r) {
    if (cluster_part != nullptr)
      if (std::optional<ControlResponse> remote = cluster_part->RemoteLogs(r)) return *remote;
    ControlResponse resp = manager.Handle(r);
    if (cluster_part != nullptr && resp.kind == ControlResponse::Kind::kJobs)
      cluster_part->Decorate(&resp.jobs);
    return resp;
  };
  auto metrics = [&manager, cluster_part] {
    if (cluster_part == nullptr) return manager.Metrics();
    auto all = manager.Statuses("");
    std::vector<JobStatus> jobs = all.ok() ? *all : std::vector<JobStatus>{};
    cluster_part->Decorate(&jobs);
    return FormatPrometheus(jobs);
  };
  auto server = ControlServer::Start(so, ControlServer::Inline(handle), metrics);
  if (!server.ok()) return Fail(c, "run", server.status(), kExitFailed);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const std::string id = manager.Submit(std::move(*job), *part ? (*part)->Options() : RunOptions{});
  // The other nodes report to the head until the job ends (declared after the manager: it
  // stops before the manager goes).
  std::unique_ptr<cluster::NodeReporter> reporter;
  if (cluster_part != nullptr)
    reporter = cluster_part->Report(
        [&manager](const ControlRequest& r) { return manager.Handle(r); }, id);
  bool stopping = false;
  while (true) {
    auto st = manager.Statuses(id);
    if (st.ok() && st->front().finished()) break;
    if (*part && st.ok()) (*part)->Progress(st->front().training.step);
    if (g_signalled && !stopping) {
      stopping = true;
      std::fprintf(stderr, "\ntandem run: stopping (Ctrl-C again is ignored; it stops soon)\n");
      (void)manager.Stop(id);
    }
    if (*part && (*part)->failed() && !stopping) {
      stopping = true;
      std::fprintf(stderr, "\ntandem run: stopping: %s\n", (*part)->failure().ToString().c_str());
      (void)manager.Stop(id);
    }
    if (tty && st.ok()) {
      std::printf("\r\033[K%s",
                  FormatProgressLine(st->front(), TerminalWidth(STDOUT_FILENO) - 1).c_str());
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (tty) std::printf("\r\033[K");
  auto report = manager.Wait(id);
  auto final_status = manager.Statuses(id);
  reporter.reset();  // a last report with the job's end, before this node leaves
  (*server)->Stop();
  if (!report.ok()) return Fail(c, "run", report.status(), kExitUsage);
  if (c.json && final_status.ok()) {
    std::printf("%s\n", JobStatusToJson(final_status->front()).c_str());
  } else {
    std::printf("%s", report->ToString().c_str());
  }
  if (g_signalled != 0) return kExitSignalBase + g_signalled;  // stopped by Ctrl-C or SIGTERM
  if (*part) {
    // The cluster's verdict: another node's failure (named) outranks this node's stop.
    Status cluster = (*part)->Finish(report->status);
    if (!cluster.ok()) return Fail(c, "run", cluster, kExitFailed);
  }
  return report->status.ok() ? kExitOk : kExitFailed;
}

int Start(const Common& c, bool foreground, int listen_tcp_port, int metrics_port,
          const ServerLimits& limits) {
  auto home = Home(c);
  if (!home.ok()) return Fail(c, "start", home.status(), kExitUsage);
  if (Status st = limits.Check(); !st.ok()) return Fail(c, "start", st, kExitUsage);
  DaemonOptions opts;
  opts.home = *home;
  opts.tcp_port = listen_tcp_port;
  opts.metrics_port = metrics_port;
  opts.limits = limits;
  if (listen_tcp_port >= 0) {
    auto token = LoadToken(*home, c.token_file);
    if (!token.ok()) return Fail(c, "start", token.status(), kExitUsage);
    if (token->empty())
      return Fail(c, "start", InvalidArgumentError("--listen-tcp needs a token: set TANDEM_TOKEN "
                                                   "or write one to {}/token (mode 0600)", *home),
                  kExitUsage);
    opts.token = *token;
  }
  const std::string socket = DaemonSocketPath(*home);
  if (std::optional<int64_t> other = ServerPid(socket))
    return Fail(c, "start", UnavailableError("a daemon (pid {}) already serves {}", *other, socket),
                kExitFailed);
  if (foreground) {
    std::signal(SIGINT, [](int) { RequestDaemonShutdown(); });
    std::signal(SIGTERM, [](int) { RequestDaemonShutdown(); });
    Status st = RunDaemon(opts);
    return st.ok() ? kExitOk : Fail(c, "start", st, kExitFailed);
  }
  const std::string log_path = *home + "/daemon.log";
  int why[2];
  if (::pipe2(why, O_CLOEXEC) != 0) return Fail(c, "start", InternalError("pipe failed"), kExitFailed);
  pid_t pid = ::fork();
  if (pid < 0) return Fail(c, "start", InternalError("fork failed"), kExitFailed);
  if (pid == 0) {
    ::close(why[0]);
    ::setsid();
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int null = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    std::signal(SIGTERM, [](int) { RequestDaemonShutdown(); });
    int why_fd = why[1];
    Status st = RunDaemon(opts, [&why_fd] {  // serving: nothing more to explain
      ::close(why_fd);
      why_fd = -1;
    });
    if (!st.ok()) {
      const std::string msg = st.ToString();
      std::fprintf(stderr, "tandem daemon: %s\n", msg.c_str());
      if (why_fd >= 0) (void)!::write(why_fd, msg.data(), msg.size());
    }
    std::fflush(nullptr);
    ::_exit(st.ok() ? 0 : 1);
  }
  ::close(why[1]);
  return AwaitDaemon(c, pid, why[0], socket, log_path);
}

}  // namespace tandem::cli
