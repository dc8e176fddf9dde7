// The embedded runtime: runs one job in-process (what `tandem run JOB.toml` does).
//
// RunJob loads the job's plugins, places its actor groups on this node's resources (all or
// nothing), opens the object store and the channels, spawns the actors, calls Run() on each
// (see job_actor.h), closes channels as their writers finish, restarts failed actors as
// their policy allows, and returns a report. On return every actor is stopped and the store
// holds no objects (or the report says what leaked).
//
// Thread-safety: RunJob blocks the calling thread; RequestStop and Snapshot may be called
// from any thread (a signal-handling thread, the control server's thread).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/actor/actor.h"
#include "runtime/channel/channel_base.h"
#include "runtime/job/job_registry.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/sched/placement.h"
#include "runtime/sched/resources.h"
#include "runtime/store/store_stats.h"

namespace tandem {

struct ActorResult {
  std::string name;
  std::string summary;  // what Run() returned
  int restarts = 0;
  Status status;        // OK, or why the actor failed
};

struct JobReport {
  std::string job_name;
  double seconds = 0;
  std::vector<ActorResult> actors;
  std::vector<ChannelStats> channels;
  StoreStats store;            // at the end, after every actor stopped
  std::string profile_table;   // cumulative per-stage timings
  Status status;               // OK, or the first failure

  std::string ToString() const;
};

struct RunOptions {
  // Called with a one-line progress message about once per `progress_interval_s`.
  double progress_interval_s = 5;
  // The job's registry (job_registry.h); null: a fresh one. A caller passes its own to share
  // objects it made with the job's actors (a benchmark's loaded target).
  std::shared_ptr<JobRegistry> registry;
  // Place the job on these resources instead of all of this node's (a daemon passes the
  // GPUs no other job holds). GpuInfo::index is the device each replica gets.
  std::optional<sched::NodeResources> resources;
};

class JobRunner {
 public:
  explicit JobRunner(RunOptions options = {}) : options_(std::move(options)) {}
  // REQUIRES: before Run().
  void set_resources(sched::NodeResources node) { options_.resources = std::move(node); }
  // Runs `job` to completion. The returned report's status says whether the job succeeded;
  // the Result itself is an error only when the job could not start (placement, plugins).
  Result<JobReport> Run(const JobSpec& job);
  // What Run() checks before it starts anything: loads the job's plugins, then checks that
  // every actor class is registered, that every group's keys are declared by its class and
  // valid (CheckActorSections), and that the job fits this node (GPUs, CPU slots, pinned
  // bytes), including each class's device check against the GPUs its replicas are placed
  // on (e.g. precision = "fp8" below sm_90). Errors name the file and the group. `notes` (may
  // be null) gets the warnings (a class that declares no keys). `node`: place on these
  // resources instead of this node's (null: discover them).
  static Status Check(const JobSpec& job, std::vector<std::string>* notes = nullptr,
                      const sched::NodeResources* node = nullptr);
  // Places `job`'s actor groups on `node` (all or nothing); replicas get the GpuInfo::index
  // of the GPUs they are placed on. InvalidArgument, naming the file, when it does not fit.
  static Result<sched::Placement> PlaceOn(const JobSpec& job, const sched::NodeResources& node);
  void RequestStop();
  bool stop_requested() const { return stop_requested_.load(); }

  // The job as it is now: while Run() works, live numbers (this closes the current profile
  // window so the stage timings are fresh); after it returns, the final picture; before, a
  // "pending" status. The id field is left empty for the caller to fill.
  JobStatus Snapshot() EXCLUDES(mu_);

  struct Live;  // what Run() exposes to Snapshot(); defined in runner.cc

 private:
  RunOptions options_;
  std::atomic<bool> stop_requested_{false};
  std::mutex mu_;
  Live* live_ GUARDED_BY(mu_) = nullptr;
  std::optional<JobStatus> final_ GUARDED_BY(mu_);
};

}  // namespace tandem
