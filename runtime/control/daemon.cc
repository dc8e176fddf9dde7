#include "runtime/control/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "runtime/control/client.h"
#include "runtime/control/home.h"
#include "runtime/control/job_manager.h"
#include "runtime/core/logging.h"

namespace tandem {
namespace {

std::atomic<JobManager*> g_manager{nullptr};

// An exclusive flock on a file, released when the object dies (or the process does).
class HomeLock {
 public:
  static Result<HomeLock> Take(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return InvalidArgumentError("cannot open {}: {}", path, std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return UnavailableError("locked");
      return InternalError("cannot lock {}: {}", path, std::strerror(err));
    }
    return HomeLock(fd);
  }
  HomeLock(HomeLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  HomeLock& operator=(HomeLock&&) = delete;
  ~HomeLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  explicit HomeLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace

std::optional<int64_t> ServerPid(const std::string& socket_path) {
  Endpoint ep;
  ep.unix_path = socket_path;
  ControlRequest ping;
  auto r = Call(ep, ping, std::chrono::seconds(5));
  if (!r.ok() || r->kind != ControlResponse::Kind::kPong) return std::nullopt;
  return r->pid;
}

bool ServerAnswers(const std::string& socket_path) { return ServerPid(socket_path).has_value(); }

void RequestDaemonShutdown() {
  if (JobManager* m = g_manager.load()) m->RequestShutdown();
}

Status RunDaemon(const DaemonOptions& options, const std::function<void()>& on_ready) {
  const std::string socket = DaemonSocketPath(options.home);
  auto lock = HomeLock::Take(options.home + "/daemon.lock");
  if (!lock.ok()) {
    if (lock.status().code() != StatusCode::kUnavailable) return lock.status();
    std::optional<int64_t> pid = ServerPid(socket);
    return UnavailableError("another tandem daemon{} already serves {}; `tandem shutdown` stops it",
                            pid ? fmt::format(" (pid {})", *pid) : std::string(), socket);
  }
  JobManager manager("daemon", options.echo_logs);
  CleanStaleFiles(options.home);
  ServerOptions so;
  so.unix_path = socket;
  so.tcp_port = options.tcp_port;
  so.tcp_host = options.tcp_host;
  so.token = options.token;
  so.metrics_port = options.metrics_port;
  so.limits = options.limits;
  ASSIGN_OR_RETURN(std::unique_ptr<ControlServer> server,
                   ControlServer::Start(
                       so,
                       [&manager](ControlRequest r, ControlServer::Reply reply) {
                         manager.HandleAsync(std::move(r), std::move(reply));
                       },
                       [&manager] { return manager.Metrics(); }));
  g_manager.store(&manager);
  const ServerLimits& lim = server->limits();
  TLOG_INFO("tandem daemon (pid {}) serving {}{}{}; at most {} connections per listener, "
            "{} pending request bytes, idle timeout {:.0f}s",
            ::getpid(), socket,
            server->tcp_port() >= 0 ? fmt::format(", tcp port {}", server->tcp_port()) : "",
            server->metrics_port() >= 0 ? fmt::format(", metrics on port {}", server->metrics_port())
                                        : "",
            lim.max_connections, lim.max_pending_bytes,
            std::chrono::duration<double>(lim.idle_timeout).count());
  if (on_ready) on_ready();
  manager.WaitForShutdown();
  TLOG_INFO("shutdown requested: stopping jobs");
  g_manager.store(nullptr);
  auto jobs = manager.Statuses("");
  if (jobs.ok())
    for (const auto& j : *jobs) (void)manager.Wait(j.id);
  server->Stop();
  TLOG_INFO("tandem daemon stopped");
  return Status::Ok();
}

}  // namespace tandem
