// Placement: fits a job's actor groups onto one node, all or nothing.
//
// Each group asks, per replica, for GPUs (0; a share in (0, 1), e.g. 0.5; or a whole number),
// CPU slots and pinned bytes. Place() either assigns every replica concrete GPU indices or
// fails with a message a user can act on:
//
//   job asks 8 GPUs (target: 5×1, drafter: 3×1), this node has 1
//
// Whole GPUs are handed out first, in request order and ascending index (target/0..4 get
// GPUs 0..4, drafter/0..2 get 5..7). Shares are then packed best-fit (largest first) onto
// the GPUs with the least room left that still fits, so two groups with gpus = 0.5 share one
// GPU. Shares are counted in millionths, so three replicas of 1/3 fit on one GPU.
//
// Thread-safety: plain values and stateless functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/actor/config.h"
#include "runtime/core/status.h"
#include "runtime/sched/resources.h"

namespace tandem::sched {

struct GroupRequest {
  std::string name;           // "drafter"
  int replicas = 1;
  double gpus = 0;            // per replica: 0, a share in (0, 1), or a whole number >= 1
  double cpus = 0;            // CPU slots per replica
  uint64_t pinned_bytes = 0;  // pinned host memory per replica
};

// Reads replicas (default 1), gpus (0), cpus (0) and pinned_bytes (0) from a job file's
// actor section; errors name the key.
Result<GroupRequest> GroupRequestFromConfig(std::string name, const ConfigValue& section);

struct ReplicaAssignment {
  std::string group;
  int replica = 0;
  std::vector<int> gpus;  // device indices; one for a share; empty for a CPU replica
  double gpu_share = 0;   // the share of gpus[0] for a fractional request, else 1 per GPU
  double cpus = 0;
  uint64_t pinned_bytes = 0;
};

struct Placement {
  std::vector<ReplicaAssignment> replicas;  // groups in request order, replicas ascending

  // The GPU of each replica of `group` (its first GPU when it has several), ready for
  // ActorSystem::SpawnGroup; empty when the group has no GPUs or is unknown.
  std::vector<int> GpusOf(std::string_view group) const;
  // One line per replica: "drafter/0: gpu 5, 1 cpu, 0 B pinned".
  std::string ToString() const;
};

// Places every replica of `groups` on `node` (see the header comment). Errors:
// InvalidArgument for a malformed request (negative amounts, gpus = 1.5) or when the job
// does not fit (total GPUs, CPU slots or pinned bytes over the node's, or shares that cannot
// be packed), naming the groups and what the node has.
Result<Placement> Place(const NodeResources& node, const std::vector<GroupRequest>& groups);

}  // namespace tandem::sched
