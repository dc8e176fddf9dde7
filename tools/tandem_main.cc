// tandem: the command-line front end. Thin: parses flags and calls tools/commands.h.
// `tandem --help` and `tandem COMMAND --help` describe every command; exit codes are listed
// in commands.h and docs/cli.md.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/cluster_run.h"
#include "tools/commands.h"
#include "tools/data_command.h"
#include "tools/eval_command.h"

int main(int argc, char** argv) {
  CLI::App app{"tandem: an actor runtime for training DFlash drafters"};
  app.require_subcommand(1);
  tandem::cli::Common c;
  app.add_option("--home", c.home, "state directory (default $TANDEM_HOME or ~/.tandem)");
  app.add_option("--socket", c.socket, "talk to this Unix socket instead of the default");
  app.add_option("--host", c.host, "host for --tcp-port (default 127.0.0.1)");
  // Ports and sizes are checked here: an int that does not fit a port (or MiB that overflow
  // bytes) would otherwise wrap to another value silently.
  const auto port_range = CLI::Range(0, 65535).description("a port number in [0, 65535]");
  app.add_option("--tcp-port", c.tcp_port, "talk to a daemon over TCP (needs the token)")
      ->check(port_range);
  app.add_option("--token-file", c.token_file, "token file (default $TANDEM_HOME/token)");
  app.add_option("--timeout", c.timeout_s, "seconds to wait for a reply (default 30)");
  app.add_flag("--json", c.json, "machine-readable output");

  std::string job, actor, what;
  bool foreground = false, wait = false, watch = false, follow = false;
  int metrics_port = -1, listen_port = -1;
  auto* run = app.add_subcommand("run", "run a job on the embedded runtime (no daemon)");
  run->add_option("job", job, "job file (TOML); default: the built-in tiny DFlash job (examples/tiny.toml)");
  run->add_option("--metrics-port", metrics_port, "serve Prometheus /metrics on this port")
      ->check(port_range);
  tandem::cli::ClusterFlags cluster;
  run->add_option("--nodes", cluster.nodes, "a job on several nodes: how many (docs/scaling.md)")
      ->check(CLI::Range(1, 65536));
  run->add_option("--node-rank", cluster.node_rank, "this node's rank (0 serves the head)")
      ->check(CLI::Range(0, 65535));
  run->add_option("--head", cluster.head, "the head's HOST:PORT (node rank 0 listens there)");
  auto* validate = app.add_subcommand("validate", "check a job file without running it");
  validate->add_option("job", job, "job file (TOML)")->required();
  std::vector<std::string> key_plugins;
  auto* keys = app.add_subcommand("keys", "list every job-file key of every actor class (Markdown)");
  keys->add_option("--plugin", key_plugins, "also load this plugin and list its classes");
  auto* start = app.add_subcommand("start", "start the daemon");
  start->add_flag("--foreground", foreground, "stay in the foreground, logging to stderr");
  start->add_option("--listen-tcp", listen_port, "also accept TCP on this port (token required)")
      ->check(port_range);
  start->add_option("--metrics-port", metrics_port, "serve Prometheus /metrics on this port")
      ->check(port_range);
  tandem::ServerLimits limits;
  size_t max_pending_mb = limits.max_pending_bytes >> 20;
  size_t max_request_mb = limits.max_request_bytes >> 20;
  double idle_timeout_s = std::chrono::duration<double>(limits.idle_timeout).count();
  start->add_option("--max-connections", limits.max_connections,
                    "connections per listener at once (default 64)");
  start->add_option("--idle-timeout", idle_timeout_s,
                    "seconds a connection may take to send a request or read a reply (default 30)");
  // A request is one frame (at most 16 MiB); the pending total is capped far below where the
  // shift into bytes would wrap.
  start->add_option("--max-request-mb", max_request_mb, "largest request in MiB (default 16)")
      ->check(CLI::Range(size_t{1}, size_t{tandem::kMaxFrameBytes >> 20}));
  start->add_option("--max-pending-mb", max_pending_mb,
                    "request MiB buffered over all connections (default 64)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  auto* submit = app.add_subcommand("submit", "submit a job to the daemon; prints its id");
  submit->add_option("job", job, "job file (TOML)")->required();
  submit->add_flag("--wait", wait, "follow its progress until it ends");
  auto* stop = app.add_subcommand("stop", "stop a job gracefully");
  stop->add_option("job", job, "job id or name")->required();
  auto* shutdown = app.add_subcommand("shutdown", "stop every job and the daemon");
  auto* status = app.add_subcommand("status", "actors, channels, store, profile of jobs");
  status->add_option("job", job, "job id or name (default: every job)");
  status->add_flag("--watch", watch, "refresh every second until the job ends");
  auto* list = app.add_subcommand("list", "list actors or jobs");
  list->add_option("what", what, "actors or jobs")->required()->check(CLI::IsMember({"actors", "jobs"}));
  std::string data_out;
  int64_t vocab = 0;
  bool skip_bad = false;
  auto* data = app.add_subcommand("data", "convert JSONL to the binary format, validate, count");
  data->add_option("input", job, "a .jsonl file or a binary set directory")->required();
  data->add_option("-o,--output", data_out, "binary set directory to write (default: only check)");
  data->add_option("--vocab", vocab, "every token id must be below this");
  data->add_flag("--skip-bad", skip_bad, "count and skip bad JSONL records (or chat lines) instead of failing");
  std::string compare, report_out;
  auto* report = app.add_subcommand("report", "write a run's metrics as one HTML page with charts");
  report->add_option("run", job, "the job's metrics file or checkpoint directory")->required();
  report->add_option("--compare", compare, "a second run to overlay");
  report->add_option("-o,--output", report_out, "HTML file to write (default: beside the metrics)");
  tandem::cli::ChatDataArgs chat;
  tandem::cli::AddChatDataOptions(data, &chat);
  tandem::cli::EvalArgs eval_args;
  auto* eval = tandem::cli::AddEvalCommand(&app, &eval_args);
  auto* logs = app.add_subcommand("logs", "a job's log lines");
  logs->add_option("job", job, "job id or name")->required();
  logs->add_option("--actor", actor, "only this actor (or group)");
  logs->add_flag("--follow", follow, "keep printing new lines until the job ends");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  namespace cli = tandem::cli;
  if (*run) return cli::Run(c, job, metrics_port, cluster);
  if (*validate) return cli::Validate(c, job);
  if (*keys) return cli::Keys(c, key_plugins);
  if (*start) {
    limits.max_pending_bytes = max_pending_mb << 20;
    limits.max_request_bytes = max_request_mb << 20;
    limits.idle_timeout = std::chrono::duration_cast<tandem::Duration>(
        std::chrono::duration<double>(std::max(idle_timeout_s, 0.0)));
    return cli::Start(c, foreground, listen_port, metrics_port, limits);
  }
  if (*submit) return cli::Submit(c, job, wait);
  if (*stop) return cli::Stop(c, job);
  if (*shutdown) return cli::Shutdown(c);
  if (*status) return cli::ShowStatus(c, job, watch);
  if (*list) return cli::List(c, what);
  if (*logs) return cli::Logs(c, job, actor, follow);
  if (*report) return cli::Report(c, job, compare, report_out);
  if (*eval) return cli::Eval(eval_args, c.json);
  if (*data && !chat.model.empty()) {
    chat.vocab = vocab;
    chat.skip_bad = skip_bad;
    return cli::ChatData(job, data_out, chat);
  }
  if (*data) return cli::Data(job, data_out, vocab, skip_bad);
  return 2;
}
