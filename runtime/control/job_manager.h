// JobManager: the jobs of one control server (the daemon, or `tandem run`'s single job),
// each run by a JobRunner on its own thread, with a log ring per job; and the request
// handler that serves them (status, submit, stop, logs, shutdown, ping).
//
// Logs: while a manager exists it owns the process's log sink. A line goes to stderr (when
// asked) and to the ring of the job whose runner thread logged it, or, for a line logged by
// an actor (the thread's log prefix is its name, "consumer/1"), to every running job with
// that actor.
// Submissions: HandleAsync parses and checks a submitted job file on the manager's own
// submit thread, one at a time in arrival order (at most kMaxQueuedSubmits waiting), so the
// server's I/O thread keeps answering status while a large or slow job file is checked.
// Thread-safety: all methods are safe from any thread; HandleAsync runs on the server's
// thread and calls its reply there or on the submit thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/job/job_spec.h"
#include "runtime/control/messages.h"
#include "runtime/job/runner.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/sched/resources.h"

namespace tandem {

class JobManager {
 public:
  // What a submitted job must pass before it is accepted (JobRunner::Check by default).
  using CheckFn = std::function<Status(const JobSpec&)>;
  // `server` names this server in pings ("daemon" or "run"); `echo_logs` also writes every
  // log line to stderr. `log_reports`: a finished job's report goes to the log (the daemon);
  // `tandem run` prints it itself, so it passes false (else echo_logs shows it twice).
  // `check` replaces JobRunner::Check (tests hold a submit in it).
  JobManager(std::string server, bool echo_logs, bool log_reports = true,
             CheckFn check = nullptr);
  // Asks every job to stop, waits for them, restores the default log sink.
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Starts `job` on a new thread, or queues it while what it needs is held by running jobs
  // (GPUs, CPU slots, pinned memory for its store and replicas, or a checkpoint dir that a
  // running job uses; state "queued", the verdict says what it waits for); queued jobs start in arrival
  // order as jobs end. Returns its id ("j1", "j2", ...).
  // `run`: the runner's options. With RunOptions::placement (the part of a job a cluster
  // head placed on this node) the job starts at once, without the check of what running
  // jobs hold: `tandem run` runs one job.
  std::string Submit(JobSpec job, RunOptions run = {}) EXCLUDES(mu_);
  // Asks a job to stop (graceful: actors see Cancelled). NotFound names the known jobs.
  Status Stop(const std::string& job) EXCLUDES(mu_);
  void StopAll() EXCLUDES(mu_);
  // Blocks until the job has finished; its report, or why it could not start.
  Result<JobReport> Wait(const std::string& job) EXCLUDES(mu_);

  // One job by id or name, or every job when `job` is "".
  Result<std::vector<JobStatus>> Statuses(const std::string& job) EXCLUDES(mu_);
  // Prometheus text exposition of every job (metrics.h).
  std::string Metrics() EXCLUDES(mu_);

  // Answers one request on the calling thread (a submit is parsed and checked here too).
  ControlResponse Handle(const ControlRequest& req);
  // Answers `req` through `reply`, exactly once: at once, or (a submit) from the submit
  // thread once the job file is parsed and checked.
  using Reply = std::function<void(ControlResponse)>;
  void HandleAsync(ControlRequest req, Reply reply) EXCLUDES(mu_);
  static constexpr size_t kMaxQueuedSubmits = 16;

  // Set by a shutdown request; the server's owner waits for it.
  void RequestShutdown() EXCLUDES(mu_);
  void WaitForShutdown() EXCLUDES(mu_);
  bool shutdown_requested() EXCLUDES(mu_);

  struct Job;

 private:
  Result<std::shared_ptr<Job>> Find(const std::string& job) EXCLUDES(mu_);
  void Route(const std::string& line) EXCLUDES(mu_);
  void SubmitLoop() EXCLUDES(mu_);
  // Returns lines to log once mu_ is released (the log sink takes mu_).
  std::vector<std::string> StartQueued() REQUIRES(mu_);
  // This node's resources without what running jobs hold (GPUs, CPU slots, pinned bytes),
  // if `job` fits on them and none of its exclusive dirs is in use (then job.gpus, cpus,
  // pinned and dirs say what it takes); else the error, and *why for the status.
  Result<sched::NodeResources> FreeResources(Job& job, std::string* why) REQUIRES(mu_);
  void RunJob(const std::shared_ptr<Job>& job) EXCLUDES(mu_);
  void CancelQueued(const std::shared_ptr<Job>& job) REQUIRES(mu_);
  static void Finish(Job& job, Result<JobReport> report);

  struct QueuedSubmit {
    ControlRequest req;
    Reply reply;
  };

  const std::string server_;
  const bool log_reports_;
  const CheckFn check_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Job>> queue_ GUARDED_BY(mu_);  // submitted, not started
  int next_id_ GUARDED_BY(mu_) = 1;
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::condition_variable submit_cv_;
  std::deque<QueuedSubmit> submits_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;  // the destructor runs: the submit thread ends
  std::thread submit_thread_;  // started by the first HandleAsync submit, under mu_
};

}  // namespace tandem
