// The tandem CLI's commands, one function each, called by tandem_main.cc after flag parsing.
// Each returns the process exit code:
//   0  success
//   1  the job failed, or the server refused the request (unknown job, bad token, ...)
//   2  bad usage or a bad job file
//   3  no server answers (no daemon, no `tandem run`), or it did not answer in time
//   130 / 143  `tandem run` stopped by Ctrl-C / SIGTERM (128 + the signal)
// Thread-safety: called from main() only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/control/server.h"

namespace tandem::cli {

struct Common {
  std::string home;        // --home, overrides TANDEM_HOME
  std::string socket;      // --socket: talk to this Unix socket
  std::string host = "127.0.0.1";
  int tcp_port = -1;       // --tcp-port: talk over TCP (needs the token)
  std::string token_file;  // --token-file
  bool json = false;
  double timeout_s = 30;
};

struct ClusterFlags;
// `cluster`: --nodes/--node-rank/--head (tools/cluster_run.h); unset ones come from the
// launcher's environment, and a single node runs the job in this process alone.
int Run(const Common& c, const std::string& job_path, int metrics_port,
        const ClusterFlags& cluster);
int Validate(const Common& c, const std::string& job_path);
// `tandem keys`: every declared job-file key (job sections, actor groups, each actor class,
// after loading `plugins`) as Markdown, the reference docs/job-file.md embeds.
int Keys(const Common& c, const std::vector<std::string>& plugins);
int Start(const Common& c, bool foreground, int listen_tcp_port, int metrics_port,
          const ServerLimits& limits);
int Submit(const Common& c, const std::string& job_path, bool wait);
int Stop(const Common& c, const std::string& job);
int Shutdown(const Common& c);
int ShowStatus(const Common& c, const std::string& job, bool watch);
int List(const Common& c, const std::string& what);
int Logs(const Common& c, const std::string& job, const std::string& actor, bool follow);
// `tandem report`: 0 when the page is written (warnings about unreadable lines go to
// stderr), 2 when RUN has no readable metrics.
int Report(const Common& c, const std::string& run, const std::string& compare,
           const std::string& out);

}  // namespace tandem::cli
