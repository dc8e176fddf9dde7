// JobSpec: a job file (TOML) turned into a validated description of an actor graph:
// named channels, actor groups (class, replicas, resources, restart policy, settings),
// plugins, object-store size and profiling interval. See docs/job-file.md.
//
// Every key of [job], [store], [profile], [channels.*] and the top level is declared once in
// job_spec_keys.cc, and each actor group's keys in ActorGroupKeys() (system.h) plus its class's
// table (registry.h). Parsing checks the job-level keys and the group keys; the class keys
// need the class, so CheckActorSections (job_spec_keys.h) checks them once plugins are loaded.
// Errors name the file, the line and the key ("job.toml:14: actors.drafter.replicas:
// 0 is out of range; expected an integer in [1, 4096]") and, for unknown keys, suggest the
// closest known one. Parsing takes time linear in the file's size, which is capped.
// Thread-safety: value types; LoadJobFile is reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/actor/config.h"
#include "runtime/actor/config_keys.h"
#include "runtime/core/status.h"

namespace tandem {

struct ChannelSpec {
  std::string name;
  int64_t capacity = 16;
  int64_t min_ready = 1;
  std::string route = "any";  // "any" | "replica" (runtime/channel/channel.h)
};

struct ActorGroupSpec {
  std::string name;          // the [actors.NAME] key
  std::string class_name;    // registered actor class ("dflash.target")
  int64_t replicas = 1;
  double gpus = 0.0;         // per replica; fractional shares allowed (0.5 = half a GPU)
  double cpus = 0;           // CPU slots per replica
  int64_t max_restarts = 0;
  std::string where;         // "job.toml:12", for messages
  ConfigValue settings;      // the whole section, with the group keys' defaults filled in
};

struct JobSpec {
  std::string path;          // the file it came from ("<embedded>" for built-ins)
  std::string name = "job";
  int64_t seed = 0;
  double node_timeout_s = 10;         // [job] node_timeout_s: a multi-node job's failure bound
  int64_t store_bytes = 256ll << 20;   // [store] capacity_mb
  double profile_interval_s = 0;      // [profile] interval_s; 0 = env or off
  std::vector<std::string> plugins;   // [job] plugins, resolved relative to the file
  std::vector<ChannelSpec> channels;
  std::vector<ActorGroupSpec> actors;

  const ChannelSpec* FindChannel(const std::string& name) const;
  // Replicas, over all groups, whose `port` ("out": writers, "in": readers) names `channel`.
  int PortReplicas(const std::string& port, const std::string& channel) const;
  // The index of replica `replica` of group `group` among those, counting the groups in
  // file order: a channel's producer (port "out") or consumer ("in") index. -1 if the
  // group's port does not name the channel.
  int PortIndex(const std::string& port, const std::string& channel, const std::string& group,
                int replica) const;
  const ActorGroupSpec* FindGroup(const std::string& name) const;  // null when absent
};

// The deepest nesting of tables and arrays a job file may have (`[actors.a]` with `x = [1]` is
// 3 deep). Conversion recurses once per level; the limit keeps a hostile file (a dotted key
// of thousands of parts) from overflowing the parser's stack, the daemon's included.
inline constexpr int kMaxJobNesting = 64;

inline constexpr int64_t kDefaultMaxJobFileBytes = 1 << 20;
// The job file size limit: $TANDEM_MAX_JOB_FILE_BYTES when it holds a positive integer,
// else kDefaultMaxJobFileBytes.
int64_t MaxJobFileBytes();

// Reads a job file of at most `max_bytes`: NotFound if missing; InvalidArgument for a
// directory or anything longer (/dev/zero stops at the limit).
Result<std::string> ReadJobFile(const std::string& path, int64_t max_bytes = MaxJobFileBytes());
// Parses and validates a job file. `path` names it in errors.
Result<JobSpec> LoadJobFile(const std::string& path, int64_t max_bytes = MaxJobFileBytes());
// Same, from text already in memory (the embedded default job, a submitted job, tests).
Result<JobSpec> ParseJobText(const std::string& text, const std::string& path,
                             int64_t max_bytes = MaxJobFileBytes());

// InvalidArgument when the job's pinned store (store.capacity_mb) is larger than the
// machine's memory (`machine_bytes`; 0: this machine's physical memory), which no run could
// allocate. Separate from parsing: a job file is valid anywhere, this is about one machine.
Status CheckStoreFitsMachine(const JobSpec& job, int64_t machine_bytes = 0);

}  // namespace tandem
