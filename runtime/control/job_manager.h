// JobManager: the jobs of one control server (the daemon, or `tandem run`'s single job),
// each run by a JobRunner on its own thread, with a log ring per job; and the request
// handler that serves them (status, submit, stop, logs, shutdown, ping).
//
// Logs: while a manager exists it owns the process's log sink. A line goes to stderr (when
// asked) and to the ring of the job whose runner thread logged it, or, for a line logged by
// an actor (the thread's log prefix is its name, "consumer/1"), to every running job with
// that actor.
// Thread-safety: all methods are safe from any thread; Handle runs on the server's thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/job/job_spec.h"
#include "runtime/control/messages.h"
#include "runtime/job/runner.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

class JobManager {
 public:
  // `server` names this server in pings ("daemon" or "run"); `echo_logs` also writes every
  // log line to stderr. `log_reports`: a finished job's report goes to the log (the daemon);
  // `tandem run` prints it itself, so it passes false (else echo_logs shows it twice).
  JobManager(std::string server, bool echo_logs, bool log_reports = true);
  // Asks every job to stop, waits for them, restores the default log sink.
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Starts `job` on a new thread; returns its id ("j1", "j2", ...).
  std::string Submit(JobSpec job) EXCLUDES(mu_);
  // Asks a job to stop (graceful: actors see Cancelled). NotFound names the known jobs.
  Status Stop(const std::string& job) EXCLUDES(mu_);
  void StopAll() EXCLUDES(mu_);
  // Blocks until the job has finished; its report, or why it could not start.
  Result<JobReport> Wait(const std::string& job) EXCLUDES(mu_);

  // One job by id or name, or every job when `job` is "".
  Result<std::vector<JobStatus>> Statuses(const std::string& job) EXCLUDES(mu_);
  // Prometheus text exposition of every job (metrics.h).
  std::string Metrics() EXCLUDES(mu_);

  ControlResponse Handle(const ControlRequest& req);

  // Set by a shutdown request; the server's owner waits for it.
  void RequestShutdown() EXCLUDES(mu_);
  void WaitForShutdown() EXCLUDES(mu_);
  bool shutdown_requested() EXCLUDES(mu_);

  struct Job;

 private:
  Result<std::shared_ptr<Job>> Find(const std::string& job) EXCLUDES(mu_);
  void Route(const std::string& line) EXCLUDES(mu_);

  const std::string server_;
  const bool log_reports_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);
  int next_id_ GUARDED_BY(mu_) = 1;
  bool shutdown_ GUARDED_BY(mu_) = false;
};

}  // namespace tandem
