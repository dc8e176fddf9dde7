// Building a job: everything a run needs before its actors start working. The first of the
// runner's three parts (job_build, job_supervisor, job_report; runner.h puts them together).
//
//   ASSIGN_OR_RETURN(sched::Placement placement, PlaceJob(job, &node, &fake_gpus));
//   ASSIGN_OR_RETURN(std::unique_ptr<BuiltJob> built,
//                    BuildJob(job, placement, {.make_device_current = !fake_gpus}));
//   JobSupervisor supervisor(built.get(), progress_interval_s);   // job_supervisor.h
//   Status status = supervisor.Run();
//   JobReport report = FinishJob(*built, status, supervisor.stop_requested(), &final_status);
//
// PlaceJob places every replica of a job on one node's resources (all or nothing) and checks
// the placed GPUs (device checks, memory bounds). BuildJob takes a placement, which may hold
// only some of the job's replicas (those a cluster's head placed on this node): it spawns
// exactly the replicas listed, each under its global name "group/REPLICA" with the GPU the
// placement gave it, so an actor's ActorContext::replica is its index in the whole job. It
// also locks the job's exclusive directories, opens the object store, declares every
// channel of the job, makes the profile, the metrics and the JobEnv the actors get, and runs
// the classes' job-prepare hooks for every group of the job (job_prepare.h) into the job's
// registry before the first replica is spawned.
// BuildJob does not load plugins or check the job's keys: JobRunner::Check does (call it
// first, or PlaceJob after loading the plugins).
//
// A channel is closed once every writer of it that this BuiltJob runs has finished
// (`local_writers`): the replicas of one node see end-of-input when their own writers are
// done; unless producers on other nodes feed it too (`fed_from_other_nodes`).
//
// Thread-safety: PlaceJob and BuildJob are reentrant. A BuiltJob is owned by one thread (the
// one that supervises it); its store, channels, profile, metrics and actor system are
// thread-safe objects shared with the actors, which stop when it is destroyed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/actor/handle.h"
#include "runtime/actor/system.h"
#include "runtime/channel/channel_registry.h"
#include "runtime/core/clock.h"
#include "runtime/core/dir_lock.h"
#include "runtime/core/status.h"
#include "runtime/job/job_actor.h"
#include "runtime/job/job_metrics.h"
#include "runtime/job/job_registry.h"
#include "runtime/job/job_spec.h"
#include "runtime/profile/profile_reporter.h"
#include "runtime/profile/profile_stats.h"
#include "runtime/sched/placement.h"
#include "runtime/sched/resources.h"
#include "runtime/store/object_store.h"

namespace tandem {

// How one actor replica ended, for the report.
struct ActorResult {
  std::string name;
  std::string summary;  // what Run() returned
  int restarts = 0;
  Status status;        // OK, or why the actor failed
};

// One replica a BuiltJob runs.
struct JobReplica {
  ActorRef ref;
  const ActorGroupSpec* group = nullptr;  // points into the JobSpec
  int replica = 0;                        // its index in the whole job
  ActorResult result;                     // filled by the supervisor
  bool finished = false;
};

struct BuildOptions {
  // The job's registry (job_registry.h); null: a fresh one.
  std::shared_ptr<JobRegistry> registry{};
  // false when the placement's GPUs are fake (tests without a device).
  bool make_device_current = true;
  // This node's id in actor addresses (ActorSystem::Options::node).
  uint32_t node = 0;
  // Time 0 of the job (metrics, seconds in the report); default: when BuildJob is called.
  std::optional<TimePoint> start{};
};

// Everything one run of a job (or of this node's part of it) owns. Members are destroyed in
// reverse order: the actors stop first, the directory locks are released last.
struct BuiltJob {
  const JobSpec* job = nullptr;  // must outlive this
  sched::Placement placement;    // the replicas run here
  TimePoint start;
  std::vector<DirLock> dir_locks;
  std::unique_ptr<ObjectStore> store;
  std::unique_ptr<ChannelRegistry> channels;  // reset by FinishJob to drop what is left
  std::unique_ptr<ProfileStats> profile;
  std::unique_ptr<ProfileReporter> reporter;
  std::unique_ptr<JobMetrics> metrics;
  std::unique_ptr<JobEnv> env;
  std::unique_ptr<ActorSystem> system;
  std::vector<JobReplica> replicas;         // groups in job order, replicas as placed
  std::map<std::string, int> local_writers;  // channel -> replicas here that write it
  // Channels that producers in other processes also feed (a cluster node's links,
  // runtime/transfer): not closed when this node's writers are done; each producer's end of
  // stream ends its lanes instead.
  std::set<std::string> fed_from_other_nodes;
};

// Places `job`'s actor groups on `node` (all or nothing); replicas get the GpuInfo::index of
// the GPUs they are placed on. InvalidArgument, naming the file, when it does not fit. No
// device checks: PlaceJob adds them.
Result<sched::Placement> PlaceOnNode(const JobSpec& job, const sched::NodeResources& node);

// Places `job`'s actor groups on `node` (this node's discovered resources when null), all or
// nothing, and checks the placed GPUs against the classes' device checks and device-memory
// bounds. `fake_gpus` (may be null) tells whether the node's GPUs are fake. Errors name the
// job file. REQUIRES: the job's plugins are loaded.
Result<sched::Placement> PlaceJob(const JobSpec& job, const sched::NodeResources* node,
                                  bool* fake_gpus = nullptr);

// Builds the replicas of `placement` (see the header comment). Errors: a placed group the job
// does not have, a directory locked by another job, a store that cannot be opened, a replica
// whose factory fails (naming it); nothing is left running after an error.
Result<std::unique_ptr<BuiltJob>> BuildJob(const JobSpec& job, const sched::Placement& placement,
                                           BuildOptions options = {});

}  // namespace tandem
