// The final report of a job run, and the status picture of a running one: the third of the
// runner's three parts (job_build.h shows all three together).
//
// JobStatusOf builds the live JobStatus (actors, channels, store, stage timings, training)
// of a BuiltJob; FinishJob, after the supervisor returned, turns the BuiltJob into the
// JobReport and the final JobStatus: it stops the profile reporter, drops what is left in
// the channels (releasing their references), checks that the store holds no object, and
// writes the metrics file's last record.
//
// Thread-safety: JobStatusOf may be called from any thread while the BuiltJob's channels
// exist (the objects it reads are thread-safe); FinishJob from the thread that owns the
// BuiltJob, once no other thread reads it.
#pragma once

#include <string>
#include <vector>

#include "runtime/channel/channel_base.h"
#include "runtime/core/status.h"
#include "runtime/job/job_build.h"
#include "runtime/job/job_status.h"
#include "runtime/profile/profile_stats.h"
#include "runtime/store/store_stats.h"

namespace tandem {

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

// The job as it is now, state "running"; `profile` is a snapshot of built.profile (the
// caller decides whether to roll its window). The id field is left empty.
JobStatus JobStatusOf(const BuiltJob& built, const ProfileSnapshot& profile);

// The report of a supervised job whose supervisor returned `status` (OK or the first
// failure); `stopped`: a stop was requested. Fills `final_status` (may be null) with the
// final picture, state "succeeded", "stopped" or "failed". A store that still holds objects
// fails a job that had succeeded. REQUIRES: the job's actors have stopped
// (JobSupervisor::Run returned); afterwards built.channels is null.
JobReport FinishJob(BuiltJob& built, Status status, bool stopped, JobStatus* final_status);

}  // namespace tandem
