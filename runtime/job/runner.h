// The embedded runtime: runs one job in-process (what `tandem run JOB.toml` does).
//
// JobRunner::Run checks the job (plugins, classes, keys: Check), places its actor groups on
// this node's resources (all or nothing), and runs the three parts of a run:
//   job_build.h       BuildJob: directory locks, object store, channels, profile, metrics,
//                     JobEnv, and the placed replicas spawned;
//   job_supervisor.h  JobSupervisor: calls Run() on each replica (see job_actor.h), relaunches
//                     it after an actor restart, closes channels as their writers finish,
//                     turns a failure or a stop request into a graceful stop of the job;
//   job_report.h      FinishJob: the report and the final status.
// A caller that runs part of a job (a node of a cluster) calls those three itself with its
// own placement. On return every actor is stopped and the store holds no objects (or the
// report says what leaked).
//
// Thread-safety: Run blocks the calling thread; RequestStop and Snapshot may be called
// from any thread (a signal-handling thread, the control server's thread).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/thread_annotations.h"
#include "runtime/job/job_build.h"
#include "runtime/job/job_registry.h"
#include "runtime/job/job_report.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_status.h"
#include "runtime/job/job_supervisor.h"
#include "runtime/sched/placement.h"
#include "runtime/sched/resources.h"

namespace tandem {

struct RunOptions {
  // Called with a one-line progress message about once per `progress_interval_s`.
  double progress_interval_s = 5;
  // The job's registry (job_registry.h); null: a fresh one. A caller passes its own to share
  // objects it made with the job's actors (a benchmark's loaded target).
  std::shared_ptr<JobRegistry> registry{};
  // Place the job on these resources instead of all of this node's (a daemon passes the
  // GPUs no other job holds). GpuInfo::index is the device each replica gets.
  std::optional<sched::NodeResources> resources{};
  // Run exactly these replicas instead of placing the whole job here: the part of a job that
  // a cluster head placed on this node (runtime/cluster). Replica indices are the job's
  // global ones; GpuInfo::index is this node's device. `fake_gpus`: the placement's GPUs
  // are TANDEM_FAKE_GPUS declarations (no device is made current).
  std::optional<sched::Placement> placement{};
  bool fake_gpus = false;
  // Called once the job is built, before its actors run, with the built job (its store and
  // channels): what a node of a cluster attaches to them (the object links to other nodes,
  // runtime/transfer). What it returns is destroyed after the actors have stopped and
  // before the report (which checks that the store is empty). An error fails the start.
  std::function<Result<std::shared_ptr<void>>(BuiltJob&)> attach{};
};

class JobRunner {
 public:
  explicit JobRunner(RunOptions options = {}) : options_(std::move(options)) {}
  // REQUIRES: before Run().
  void set_resources(sched::NodeResources node) { options_.resources = std::move(node); }
  // REQUIRES: before Run().
  void set_options(RunOptions options) { options_ = std::move(options); }
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
  // Check without the placement: plugins, classes and keys (a cluster's head places the job
  // across nodes instead).
  static Status CheckSpec(const JobSpec& job, std::vector<std::string>* notes = nullptr);
  // Places `job`'s actor groups on `node` (all or nothing); replicas get the GpuInfo::index
  // of the GPUs they are placed on. InvalidArgument, naming the file, when it does not fit.
  // (PlaceOnNode, job_build.h; PlaceJob there adds the device and memory checks.)
  static Result<sched::Placement> PlaceOn(const JobSpec& job, const sched::NodeResources& node) {
    return PlaceOnNode(job, node);
  }
  void RequestStop();
  bool stop_requested() const { return stop_requested_.load(); }

  // The job as it is now: while Run() works, live numbers (this closes the current profile
  // window so the stage timings are fresh); after it returns, the final picture; before, a
  // "pending" status. The id field is left empty for the caller to fill.
  JobStatus Snapshot() EXCLUDES(mu_);

 private:
  RunOptions options_;
  std::atomic<bool> stop_requested_{false};
  std::mutex mu_;
  const BuiltJob* live_ GUARDED_BY(mu_) = nullptr;       // while the job runs
  JobSupervisor* supervisor_ GUARDED_BY(mu_) = nullptr;  // while the job runs
  std::optional<JobStatus> final_ GUARDED_BY(mu_);
};

}  // namespace tandem
