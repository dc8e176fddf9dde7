// tandem-bench cluster: what crossing nodes costs.
//
//   tandem-bench cluster [transfer] [--mb 16] [--count 64]
//   tandem-bench cluster job [--tandem PATH] [--job examples/cluster/tiny-3node.toml]
//                            [--steps 64]
//
// transfer: a channel's objects over an object link on 127.0.0.1 (two stores in one process
//   standing for two nodes: pop, send from the pinned arena, receive into the other store,
//   push, ack, release), in GB/s, against a plain socket copy of the same bytes (one thread
//   sends a buffer, another receives into one), and the ratio.
// job: the 3-node tiny job (both targets on node 0, a drafter on each of nodes 1 and 2) as
//   three `tandem run` processes on 127.0.0.1 against the same job in one process: wall time
//   per drafter step of each, and the difference (the overhead of three processes, object
//   links and Gloo per step; start-up is included in both).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "runtime/channel/channel_registry.h"
#include "runtime/core/clock.h"
#include "runtime/transfer/link.h"
#include "runtime/transfer/socket.h"
#include "runtime/transfer/wire_port.h"

extern char** environ;

namespace tandem::bench {
namespace {

using namespace std::chrono_literals;

std::string Flag(const std::vector<std::string>& args, const std::string& name,
                 const std::string& fallback) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == name) return args[i + 1];
  for (const std::string& a : args)
    if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
  return fallback;
}

struct BenchNode {
  std::unique_ptr<ObjectStore> store;
  ChannelRegistry channels;
  transfer::WireChannels wire;
  std::unique_ptr<transfer::WirePort> port;
  std::shared_ptr<Channel<ObjectRef>> ch;
};

Status MakeNode(BenchNode* n, uint64_t capacity_bytes) {
  StoreOptions o;
  o.capacity_bytes = capacity_bytes;
  ASSIGN_OR_RETURN(n->store, ObjectStore::Open(o));
  ChannelOptions co;
  co.capacity = 4;
  co.route = ChannelRoute::kReplica;
  RETURN_IF_ERROR(n->channels.Declare("ch", co));
  n->wire.Register<ObjectRef>("ch");
  ASSIGN_OR_RETURN(n->port, n->wire.Open("ch", n->channels));
  ASSIGN_OR_RETURN(n->ch, n->channels.Open<ObjectRef>("ch"));
  return Status::Ok();
}

// GB/s of `count` objects of `bytes` over an object link.
Result<double> LinkRate(uint64_t bytes, int count) {
  BenchNode a, b;
  RETURN_IF_ERROR(MakeNode(&a, bytes * 10));
  RETURN_IF_ERROR(MakeNode(&b, bytes * 10));
  transfer::LinkOptions lo;
  lo.token = "bench";
  auto listener = transfer::LinkListener::Start(
      "127.0.0.1", 0, lo, b.store.get(),
      [&](const transfer::LinkHello&) -> Result<transfer::LinkListener::Inbound> {
        return transfer::LinkListener::Inbound{b.port.get(), {0}, "ch consumer 0"};
      },
      [](const Status& s) { std::fprintf(stderr, "link failed: %s\n", s.ToString().c_str()); });
  if (!listener.ok()) return listener.status();
  ASSIGN_OR_RETURN(auto sender,
                   transfer::LinkSender::Connect("127.0.0.1", (*listener)->port(),
                                                 transfer::LinkHello{"ch", 0, 0}, lo, "node 1",
                                                 [](const Status&) {}));
  sender->Start(a.port.get(), 0, {0}, 4, [] {});
  std::thread consumer([&] {
    for (int i = 0; i < count; ++i)
      if (!b.ch->PopAs(0, 60s).ok()) return;
  });
  const TimePoint start = SteadyClock::now();
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(MutableObject m, a.store->Create(bytes, "bench"));
    std::memset(m.data(), i, bytes);  // the producer writes its object, as a target does
    RETURN_IF_ERROR(a.ch->Push(m.Seal()));
  }
  consumer.join();
  const double s = SecondsSince(start);
  RETURN_IF_ERROR(a.ch->FinishProducer(0));
  sender->Stop();
  (*listener)->Stop();
  return static_cast<double>(bytes) * count / s / 1e9;
}

// GB/s of the same bytes over a plain loopback socket (the sender writes its buffer first).
Result<double> SocketRate(uint64_t bytes, int count) {
  ASSIGN_OR_RETURN(transfer::Socket l, transfer::Listen("127.0.0.1", 0));
  ASSIGN_OR_RETURN(int port, transfer::LocalPort(l));
  ASSIGN_OR_RETURN(transfer::Socket out, transfer::Connect("127.0.0.1", port, 10s));
  ASSIGN_OR_RETURN(transfer::Socket in, transfer::Accept(l, 10s));
  std::vector<uint8_t> src(bytes), dst(bytes);
  Status recv_status;
  std::thread receiver([&] {
    for (int i = 0; i < count && recv_status.ok(); ++i) recv_status = in.RecvAll(dst.data(), bytes);
  });
  const TimePoint start = SteadyClock::now();
  for (int i = 0; i < count; ++i) {
    std::memset(src.data(), i, bytes);
    RETURN_IF_ERROR(out.SendAll(src.data(), bytes));
  }
  receiver.join();
  RETURN_IF_ERROR(recv_status);
  return static_cast<double>(bytes) * count / SecondsSince(start) / 1e9;
}

int Transfer(const std::vector<std::string>& args) {
  const uint64_t mb = std::strtoull(Flag(args, "--mb", "16").c_str(), nullptr, 10);
  const int count = std::atoi(Flag(args, "--count", "64").c_str());
  if (mb == 0 || count <= 0) {
    std::fprintf(stderr, "cluster transfer: --mb and --count must be positive\n");
    return 2;
  }
  const uint64_t bytes = mb << 20;
  Result<double> link = LinkRate(bytes, count);
  Result<double> sock = SocketRate(bytes, count);
  if (!link.ok() || !sock.ok()) {
    std::fprintf(stderr, "cluster transfer: %s %s\n", link.status().ToString().c_str(),
                 sock.status().ToString().c_str());
    return 1;
  }
  std::printf("| what runs | tandem | peer | ratio |\n| --- | --- | --- | --- |\n");
  std::printf("| %d objects of %llu MiB over an object link on 127.0.0.1 | %.2f GB/s | plain "
              "socket copy %.2f GB/s | %.2fx |\n",
              count, static_cast<unsigned long long>(mb), *link, *sock, *link / *sock);
  return 0;
}

// Runs `argv` with `env` added; returns its exit status, its output in `out`.
int Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
          const std::string& log, pid_t* pid_out) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  for (const auto& s : envs) e.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  e.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const int rc = posix_spawn(pid_out, a[0], &fa, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

int Wait(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Seconds to run `job` on `nodes` processes (1: plain `tandem run`).
Result<double> RunJob(const std::string& tandem, const std::string& job, int nodes,
                      const std::string& dir, int port) {
  const std::vector<std::string> env = {"TANDEM_HOME=" + dir + "/home",
                                        "TANDEM_TOKEN=bench-cluster-token"};
  std::vector<pid_t> pids(static_cast<size_t>(nodes));
  const TimePoint start = SteadyClock::now();
  for (int r = 0; r < nodes; ++r) {
    std::vector<std::string> argv = {tandem, "run", job};
    if (nodes > 1)
      argv.insert(argv.end(), {"--nodes", std::to_string(nodes), "--node-rank",
                               std::to_string(r), "--head", "127.0.0.1:" + std::to_string(port)});
    const std::string log = dir + "/node" + std::to_string(r) + ".log";
    if (Spawn(argv, env, log, &pids[static_cast<size_t>(r)]) != 0)
      return UnavailableError("cannot start {}", tandem);
  }
  for (int r = 0; r < nodes; ++r) {
    if (int rc = Wait(pids[static_cast<size_t>(r)]); rc != 0)
      return UnavailableError("node {} of {} exited with {} (see {}/node{}.log)", r, nodes, rc,
                              dir, r);
  }
  return SecondsSince(start);
}

int Job(const std::vector<std::string>& args) {
  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string exe_dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
  exe_dir = exe_dir.substr(0, exe_dir.rfind('/'));
  const std::string tandem = Flag(args, "--tandem", exe_dir + "/../tools/tandem");
  const std::string example = Flag(args, "--job", "examples/cluster/tiny-3node.toml");
  const int steps = std::atoi(Flag(args, "--steps", "64").c_str());
  std::ifstream in(example);
  if (!in || steps <= 0) {
    std::fprintf(stderr, "cluster job: cannot read %s (or --steps <= 0)\n", example.c_str());
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string job = std::regex_replace(text.str(), std::regex("\nmax_steps = \\d+"),
                                       "\nmax_steps = " + std::to_string(steps));
  job = std::regex_replace(job, std::regex("\nbatches_per_epoch = \\d+"),
                           "\nbatches_per_epoch = " + std::to_string(steps + 4));
  char tmpl[] = "/tmp/tandem-bench-cluster-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (dir == nullptr) return 1;
  const std::string path = std::string(dir) + "/job.toml";
  std::ofstream(path) << job;
  auto free_port = []() -> int {
    auto l = transfer::Listen("127.0.0.1", 0);
    if (!l.ok()) return 29517;
    Result<int> p = transfer::LocalPort(*l);
    return p.ok() ? *p : 29517;
  };
  Result<double> one = RunJob(tandem, path, 1, dir, 0);
  Result<double> three = RunJob(tandem, path, 3, dir, free_port());
  if (!one.ok() || !three.ok()) {
    std::fprintf(stderr, "cluster job: %s / %s\n", one.status().ToString().c_str(),
                 three.status().ToString().c_str());
    return 1;
  }
  std::printf("| what runs | tandem | peer | ratio |\n| --- | --- | --- | --- |\n");
  std::printf("| tiny-3node, %d steps: 3 processes on 127.0.0.1 | %.1f ms/step (%.1f s) | one "
              "process %.1f ms/step (%.1f s) | +%.1f ms/step |\n",
              steps, *three * 1e3 / steps, *three, *one * 1e3 / steps, *one,
              (*three - *one) * 1e3 / steps);
  return 0;
}

int Cluster(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "job") return Job({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "transfer") return Transfer({args.begin() + 1, args.end()});
  return Transfer(args);
}

}  // namespace

TANDEM_BENCH("cluster", "cluster",
             "object links over loopback vs a plain socket (`transfer`, default); the 3-node "
             "tiny job vs one process (`job`)",
             Cluster);

}  // namespace tandem::bench
