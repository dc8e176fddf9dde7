// JobActor: the base of actors that take part in a job run by the embedded runtime, and
// JobEnv: what the runtime lends them (the object store, the job's channels, the profile).
//
// The runtime calls Run() once per actor after OnStart (again after a restart). Run does
// the actor's part of the job and returns a one-line summary when its work is done: a
// source when it has produced everything, a sink when its input channel is closed and
// drained. When every replica of a group that writes a channel (`out = "NAME"`) has
// returned, the runtime closes that channel. Run should return promptly with Cancelled
// once stop_requested() or env->stopping() is true.
//
// Thread-safety: JobEnv's members are thread-safe objects shared by all actors of a job.
// What actors share beyond the store and the channels goes in `registry` (job_registry.h),
// never in a process-global table.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "runtime/actor/actor.h"
#include "runtime/channel/channel_registry.h"
#include "runtime/job/job_registry.h"
#include "runtime/job/job_spec.h"
#include "runtime/profile/profile_stats.h"
#include "runtime/store/object_store.h"

namespace tandem {

struct JobEnv {
  const JobSpec* job = nullptr;
  ObjectStore* store = nullptr;
  ChannelRegistry* channels = nullptr;
  ProfileStats* profile = nullptr;
  std::shared_ptr<JobRegistry> registry;  // per-job shared objects (never null in a job)
  uint64_t run_id = 0;            // unique per JobRunner::Run in this process
  std::atomic<bool> stop{false};  // set on Ctrl-C or when the job fails

  bool stopping() const { return stop.load(std::memory_order_relaxed); }
};

class JobActor : public Actor {
 public:
  // REQUIRES: env outlives the call. Returns a summary line, or the error that failed the actor.
  virtual Result<std::string> Run(JobEnv* env) = 0;
};

}  // namespace tandem
