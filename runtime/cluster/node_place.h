// NodePlace: where this process sits in a cluster of tandem processes (one per node): its
// node rank, the number of nodes, and the head's address (node rank 0 runs the head).
//
// Sources, first match wins:
//   1. explicit flags (`--nodes N --node-rank R --head HOST:PORT`), passed in as NodeFlags;
//   2. Slurm (`srun`): SLURM_PROCID, SLURM_NTASKS; the head is the first host of
//      SLURM_NODELIST (compressed syntax `gpu[01-03,07],cpu5` expanded), else
//      SLURM_LAUNCH_NODE_IPADDR; the port is TANDEM_HEAD_PORT, else MASTER_PORT, else
//      kDefaultHeadPort;
//   3. torchrun-style variables (what Kubernetes JobSet / LeaderWorkerSet set): RANK,
//      WORLD_SIZE, MASTER_ADDR, MASTER_PORT (TANDEM_HEAD_PORT overrides the port).
//   None of them: a single node (rank 0 of 1, head 127.0.0.1:kDefaultHeadPort).
// Every variable is read through an EnvLookup, so tests pass a map instead of touching the
// process environment. Bad values give InvalidArgument naming the variable or flag and the
// value ("SLURM_PROCID=3 is not below SLURM_NTASKS=2").
//
// Thread-safety: plain values and pure functions (given a pure lookup).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::cluster {

// The head's TCP port when neither a flag nor the environment gives one.
inline constexpr int kDefaultHeadPort = 29517;

struct NodePlace {
  int node_rank = 0;
  int nodes = 1;
  std::string head_host = "127.0.0.1";
  int head_port = kDefaultHeadPort;
  std::string source = "single node";  // "flags", "slurm", "torchrun" or "single node"

  bool is_head() const { return node_rank == 0; }
  // "node 1 of 3 (slurm), head gpu01:29517".
  std::string ToString() const;
};

// The CLI's flags; unset ones are nullopt. `head` is "HOST:PORT" (or "[v6addr]:PORT").
struct NodeFlags {
  std::optional<int> nodes;
  std::optional<int> node_rank;
  std::optional<std::string> head;
};

// Returns a variable's value, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
// Reads the process environment (getenv).
EnvLookup ProcessEnv();

// Resolves the place (see the header comment). Flags must be all given (nodes and node
// rank; head may be omitted only when nodes == 1) or none.
Result<NodePlace> ResolveNodePlace(const NodeFlags& flags, const EnvLookup& env);

// Expands a Slurm host list ("gpu[01-03,07],cpu5" -> gpu01 gpu02 gpu03 gpu07 cpu5), keeping
// zero padding. InvalidArgument naming `what` for unbalanced brackets or a bad range.
Result<std::vector<std::string>> ExpandSlurmNodeList(std::string_view list,
                                                     std::string_view what = "SLURM_NODELIST");

// Splits "HOST:PORT" / "[v6]:PORT"; errors name `what`.
Result<std::pair<std::string, int>> ParseHostPort(std::string_view text, std::string_view what);

}  // namespace tandem::cluster
