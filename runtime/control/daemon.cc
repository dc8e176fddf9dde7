#include "runtime/control/daemon.h"

#include <atomic>

#include "runtime/control/client.h"
#include "runtime/control/home.h"
#include "runtime/control/job_manager.h"
#include "runtime/control/server.h"
#include "runtime/core/logging.h"

namespace tandem {
namespace {

std::atomic<JobManager*> g_manager{nullptr};

}  // namespace

bool ServerAnswers(const std::string& socket_path) {
  Endpoint ep;
  ep.unix_path = socket_path;
  ControlRequest ping;
  auto r = Call(ep, ping, std::chrono::seconds(5));
  return r.ok() && r->kind == ControlResponse::Kind::kPong;
}

void RequestDaemonShutdown() {
  if (JobManager* m = g_manager.load()) m->RequestShutdown();
}

Status RunDaemon(const DaemonOptions& options, const std::function<void()>& on_ready) {
  const std::string socket = DaemonSocketPath(options.home);
  if (ServerAnswers(socket))
    return UnavailableError("a tandem daemon already serves {}; `tandem shutdown` stops it", socket);
  JobManager manager("daemon", options.echo_logs);
  ServerOptions so;
  so.unix_path = socket;
  so.tcp_port = options.tcp_port;
  so.tcp_host = options.tcp_host;
  so.token = options.token;
  so.metrics_port = options.metrics_port;
  ASSIGN_OR_RETURN(std::unique_ptr<ControlServer> server,
                   ControlServer::Start(
                       so, [&manager](const ControlRequest& r) { return manager.Handle(r); },
                       [&manager] { return manager.Metrics(); }));
  g_manager.store(&manager);
  TLOG_INFO("tandem daemon serving {}{}{}", socket,
            server->tcp_port() >= 0 ? fmt::format(", tcp port {}", server->tcp_port()) : "",
            server->metrics_port() >= 0 ? fmt::format(", metrics on port {}", server->metrics_port())
                                        : "");
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
