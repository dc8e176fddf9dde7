// JobSpec: a job file (TOML) turned into a validated description of an actor graph:
// named channels, actor groups (class, replicas, resources, restart policy, settings),
// plugins, object-store size and profiling interval. See docs/job-file.md.
//
// Errors name the file, the line and the key ("job.toml:14: actors.drafter.replicas:
// expected an integer >= 1, got -2") and, for unknown keys, suggest the closest known one.
// Thread-safety: value types; LoadJobFile is reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/actor/config.h"
#include "runtime/core/status.h"

namespace tandem {

struct ChannelSpec {
  std::string name;
  int64_t capacity = 16;
  int64_t min_ready = 1;
};

struct ActorGroupSpec {
  std::string name;          // the [actors.NAME] key
  std::string class_name;    // registered actor class ("dflash.target")
  int64_t replicas = 1;
  double gpus = 0.0;         // per replica; fractional shares allowed (0.5 = half a GPU)
  int64_t cpus = 1;          // CPU slots per replica
  int64_t max_restarts = 0;
  double restart_backoff_s = 0.1;
  std::string where;         // "job.toml:12", for messages
  ConfigValue settings;      // the whole section, including the keys above
};

struct JobSpec {
  std::string path;          // the file it came from ("<embedded>" for built-ins)
  std::string name = "job";
  int64_t seed = 0;
  int64_t store_bytes = 256ll << 20;   // [store] capacity_mb
  double profile_interval_s = 0;      // [profile] interval_s; 0 = env or off
  std::vector<std::string> plugins;   // [job] plugins, resolved relative to the file
  std::vector<ChannelSpec> channels;
  std::vector<ActorGroupSpec> actors;

  const ChannelSpec* FindChannel(const std::string& name) const;
};

// Parses and validates a job file. `path` names it in errors.
Result<JobSpec> LoadJobFile(const std::string& path);
// Same, from text already in memory (the embedded default job, tests).
Result<JobSpec> ParseJobText(const std::string& text, const std::string& path);

// The closest of `candidates` to `word` by edit distance, or "" if none is close.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tandem
