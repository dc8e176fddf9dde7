// Supervising a built job: the second of the runner's three parts (job_build.h shows all
// three together).
//
// JobSupervisor::Run() calls JobActor::Run on every replica of a BuiltJob and waits until all
// of them returned. While it waits it
//   - relaunches a replica's Run after the actor's supervisor restarted the actor
//     (CallAcrossRestarts, relaunch.h: max_restarts and the backoff are the actor system's),
//   - closes a channel once every local writer of it returned (BuiltJob::local_writers),
//   - fails the job on the first replica that failed for good: the job's actors are asked to
//     stop (JobEnv::stop) and every channel is closed,
//   - turns RequestStop() into the same graceful stop; a replica that then answers Cancelled
//     or Unavailable (a closed channel) is stopping, not failing,
//   - logs a progress line every `progress_interval_s` and samples the job's metrics every
//     kMetricsSampleSeconds.
// It sleeps on a condition variable between those: a replica's completion, a stop request
// and the next progress or sample time wake it. Each replica's ActorResult (summary,
// restarts, cause) is left in BuiltJob::replicas.
//
// Thread-safety: Run() is called once, by the thread that owns the BuiltJob; RequestStop()
// may be called from any thread, before, during or after Run().
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/job/job_build.h"

namespace tandem {

class JobSupervisor {
 public:
  // `built` must outlive the supervisor.
  JobSupervisor(BuiltJob* built, double progress_interval_s)
      : built_(built), progress_interval_s_(progress_interval_s) {}
  JobSupervisor(const JobSupervisor&) = delete;
  JobSupervisor& operator=(const JobSupervisor&) = delete;

  // Runs every replica to completion (see the header comment). Returns OK, or the job's
  // first failure. REQUIRES: called once.
  Status Run();
  // Asks for a graceful stop: the actors are told to stop and the channels are closed.
  void RequestStop();
  bool stop_requested() const { return stop_requested_.load(); }

  // Replicas' Run calls that returned, as the completion callbacks hand them over.
  struct Completions {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<size_t, Result<std::string>>> done GUARDED_BY(mu);
    bool stop GUARDED_BY(mu) = false;  // a stop request not yet acted on
  };

 private:
  void Launch(size_t index);
  void Settle(size_t index, Result<std::string> r);
  void FailJob(const Status& st);
  void SampleMetrics();
  std::string ProgressLine() const;

  BuiltJob* const built_;
  const double progress_interval_s_;
  std::atomic<bool> stop_requested_{false};
  // Shared with the completion callbacks and RequestStop, so neither touches the supervisor.
  std::shared_ptr<Completions> completions_ = std::make_shared<Completions>();
  Status status_;      // the first failure; Run's thread only
  size_t finished_ = 0;
};

}  // namespace tandem
