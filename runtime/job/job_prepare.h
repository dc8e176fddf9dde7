// Job-level preparation by actor classes: what a job's actors share from the start, set up
// once when the job is built, before any replica runs.
//
// A class registers a hook (TANDEM_REGISTER_JOB_PREPARE). PrepareJob, called by BuildJob
// after the job's registry exists and before any replica is spawned, runs the hook once per
// group of that class, in job order, on every node that builds the job (whatever replicas
// it runs). The hook reads its own group's settings and publishes what other actors need
// into the job's registry (job_registry.h), so that no actor reads another class's settings:
// the dflash.drafter class publishes the data positions its checkpoint directory's resume
// point holds, and each dflash.target replica reads its own from there.
//
// An error from a hook fails the build, naming the group.
//
// Thread-safety: registration happens during static initialisation (or before jobs are
// built); PrepareJob is safe from any thread. A hook must be safe to run for several jobs at
// once (it gets everything through its arguments).
#pragma once

#include <functional>
#include <string>

#include "runtime/core/status.h"
#include "runtime/job/job_registry.h"
#include "runtime/job/job_spec.h"

namespace tandem {

using JobPrepareHook =
    std::function<Status(const JobSpec& job, const ActorGroupSpec& group, JobRegistry& registry)>;

// Registers `hook` for actor class `class_name` (one per class; a second is refused with a
// logged error and false).
bool RegisterJobPrepare(const std::string& class_name, JobPrepareHook hook);

// Runs the hook of each group's class, if it has one, in job order.
Status PrepareJob(const JobSpec& job, JobRegistry& registry);

}  // namespace tandem

#define TANDEM_JOB_PREPARE_CONCAT_INNER(a, b) a##b
#define TANDEM_JOB_PREPARE_CONCAT(a, b) TANDEM_JOB_PREPARE_CONCAT_INNER(a, b)
// At namespace scope in a .cc file: TANDEM_REGISTER_JOB_PREPARE("my.actor", MyPrepareFn);
#define TANDEM_REGISTER_JOB_PREPARE(class_name, hook)                              \
  static const bool TANDEM_JOB_PREPARE_CONCAT(tandem_job_prepare_, __LINE__) = \
      ::tandem::RegisterJobPrepare(class_name, hook)
