#include "runtime/control/job_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "runtime/control/log_ring.h"
#include "runtime/control/metrics.h"
#include "runtime/core/clock.h"
#include "runtime/core/logging.h"
#include "runtime/job/job_spec_keys.h"
#include "runtime/sched/resources.h"

namespace tandem {

struct JobManager::Job {
  std::string id;
  JobSpec spec;
  JobRunner runner;
  bool placed = false;             // its runner was given a placement (a cluster node's part)
  LogRing logs;
  std::thread thread;
  std::atomic<bool> done{false};
  std::atomic<bool> queued{true};  // waiting for what other jobs hold
  // Held while it runs; written under the manager's mu_.
  std::vector<int> gpus;
  double cpus = 0;                 // CPU slots of its replicas
  uint64_t pinned = 0;             // pinned bytes: its replicas' and its object store's
  std::vector<ExclusiveDir> dirs;  // checkpoint dirs and the like (job_spec_keys.h)
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<JobReport>> report GUARDED_BY(mu);
  std::string waiting_for GUARDED_BY(mu);  // while queued: what it waits for

  bool HasActor(const std::string& actor) const {
    std::string group = actor.substr(0, actor.rfind('/'));
    for (const auto& g : spec.actors)
      if (g.name == group) return true;
    return false;
  }

  JobStatus Status() {
    JobStatus st = runner.Snapshot();
    st.id = id;
    st.name = spec.name;
    std::lock_guard<std::mutex> lock(mu);
    if (report && !report->ok()) {
      // Stopped while queued: it never ran.
      st.state = report->status().code() == StatusCode::kCancelled ? "stopped" : "failed";
      st.error = report->status().ToString();
    } else if (queued.load()) {
      st.state = "queued";
      st.verdict = "waiting for " + waiting_for;
    }
    return st;
  }
};

namespace {

thread_local JobManager::Job* tls_job = nullptr;

ControlResponse Jobs(std::vector<JobStatus> jobs) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kJobs;
  r.jobs = std::move(jobs);
  return r;
}

}  // namespace

JobManager::JobManager(std::string server, bool echo_logs, bool log_reports, CheckFn check)
    : server_(std::move(server)),
      log_reports_(log_reports),
      check_(check ? std::move(check)
                   : CheckFn([](const JobSpec& j) { return JobRunner::Check(j); })) {
  log::SetSink([this, echo_logs](log::Level, std::string_view line) {
    if (echo_logs) std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    Route(std::string(line));
  });
}

JobManager::~JobManager() {
  std::thread submitter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    submitter = std::move(submit_thread_);
  }
  submit_cv_.notify_all();
  if (submitter.joinable()) submitter.join();
  StopAll();
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs = jobs_;
  }
  for (auto& j : jobs)
    if (j->thread.joinable()) j->thread.join();
  log::SetSink(nullptr);
}

void JobManager::Route(const std::string& line) {
  if (tls_job != nullptr) {
    tls_job->logs.Append("", line);
    return;
  }
  const std::string& actor = log::ThreadPrefix();
  if (actor.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& j : jobs_)
    if (!j->done.load() && j->HasActor(actor)) j->logs.Append(actor, line);
}

std::string JobManager::Submit(JobSpec spec, RunOptions run) {
  auto job = std::make_shared<Job>();
  job->spec = std::move(spec);
  job->placed = run.placement.has_value();
  job->runner.set_options(std::move(run));
  std::vector<std::string> notes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job->id = fmt::format("j{}", next_id_++);
    jobs_.push_back(job);
    queue_.push_back(job);
    notes = StartQueued();
  }
  for (const auto& n : notes) TLOG_INFO("{}", n);  // not under mu_: the log sink takes it
  return job->id;
}

Result<sched::NodeResources> JobManager::FreeResources(Job& job, std::string* why) {
  // A directory only one running job may use (a checkpoint dir): wait for its holder.
  const std::vector<ExclusiveDir> dirs = ExclusiveDirs(job.spec);
  std::vector<std::shared_ptr<Job>> running;
  for (const auto& j : jobs_)
    if (!j->queued.load() && !j->done.load()) running.push_back(j);
  for (const ExclusiveDir& d : dirs)
    for (const auto& j : running)
      for (const ExclusiveDir& held : j->dirs)
        if (held.path == d.path) {
          *why = fmt::format("{} '{}', which running job {} ('{}') uses", d.key, d.path, j->id,
                             j->spec.name);
          return UnavailableError("{}", *why);
        }
  ASSIGN_OR_RETURN(sched::NodeResources node, sched::DiscoverResources());
  std::map<int, std::string> held;  // GPU index -> the job holding it
  double cpus_held = 0;
  uint64_t pinned_held = 0;
  for (const auto& j : running) {
    for (int g : j->gpus) held[g] = j->id;
    cpus_held += j->cpus;
    pinned_held += j->pinned;
  }
  sched::NodeResources free = node;
  free.gpus.clear();
  for (const sched::GpuInfo& g : node.gpus)
    if (held.count(g.index) == 0) free.gpus.push_back(g);
  free.cpu_slots = std::max(0, node.cpu_slots - static_cast<int>(std::ceil(cpus_held - 1e-9)));
  free.pinned_bytes = node.pinned_bytes - std::min(node.pinned_bytes, pinned_held);
  std::vector<std::string> gpus;
  for (const auto& [gpu, id] : held) gpus.push_back(fmt::format("GPU {} by {}", gpu, id));
  const std::string held_by = fmt::format(
      "{}{}{} of {} CPU slots, {} of {} pinned", fmt::join(gpus, ", "), gpus.empty() ? "" : "; ",
      cpus_held, node.cpu_slots, FormatBytes(pinned_held), FormatBytes(node.pinned_bytes));
  auto placed = JobRunner::PlaceOn(job.spec, free);
  if (!placed.ok()) {
    *why = fmt::format("resources that running jobs hold ({}): {}", held_by,
                       placed.status().message());
    return placed.status();
  }
  double cpus = 0;
  uint64_t pinned = static_cast<uint64_t>(std::max<int64_t>(job.spec.store_bytes, 0));
  for (const auto& r : placed->replicas) {
    cpus += r.cpus;
    pinned += r.pinned_bytes;
  }
  // With nothing running the job starts regardless (its store reports what does not fit).
  if (pinned > free.pinned_bytes && !running.empty()) {
    *why = fmt::format("pinned memory that running jobs hold ({}): this job needs {} (its "
                       "store and replicas), {} of {} is free", held_by, FormatBytes(pinned),
                       FormatBytes(free.pinned_bytes), FormatBytes(node.pinned_bytes));
    return UnavailableError("{}", *why);
  }
  std::set<int> used;
  for (const auto& r : placed->replicas) used.insert(r.gpus.begin(), r.gpus.end());
  job.gpus.assign(used.begin(), used.end());
  job.cpus = cpus;
  job.pinned = pinned;
  job.dirs = dirs;
  return free;
}

// Starts queued jobs in arrival order while the first of them fits; a job that does not
// fit now waits (later jobs wait behind it, so it cannot starve).
std::vector<std::string> JobManager::StartQueued() {
  std::vector<std::string> notes;
  while (!queue_.empty() && !closing_) {
    std::shared_ptr<Job> job = queue_.front();
    std::string why;
    if (job->placed) {  // a cluster node's part: the head placed it, it starts at once
      queue_.pop_front();
      job->queued.store(false);
      job->thread = std::thread([this, job] { RunJob(job); });
      continue;
    }
    auto free = FreeResources(*job, &why);
    if (!free.ok()) {
      std::lock_guard<std::mutex> lock(job->mu);
      if (job->waiting_for != why) notes.push_back(fmt::format("job {} queued: waiting for {}", job->id, why));
      job->waiting_for = why;
      return notes;
    }
    queue_.pop_front();
    job->runner.set_resources(std::move(*free));
    job->queued.store(false);
    job->thread = std::thread([this, job] { RunJob(job); });
  }
  return notes;
}

void JobManager::RunJob(const std::shared_ptr<Job>& job) {
  tls_job = job.get();
  log::SetThreadPrefix("job " + job->id);
  TLOG_INFO("job '{}' ({}) starting{}", job->spec.name, job->spec.path,
            job->gpus.empty() ? "" : fmt::format(" on GPUs {}", fmt::join(job->gpus, ",")));
  Result<JobReport> report = job->runner.Run(job->spec);
  if (report.ok()) {
    if (log_reports_) TLOG_INFO("{}", report->ToString());
  } else {
    TLOG_ERROR("job '{}' could not start: {}", job->spec.name, report.status().ToString());
  }
  Finish(*job, std::move(report));
  tls_job = nullptr;
  std::vector<std::string> notes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notes = StartQueued();  // its GPUs are free now
  }
  for (const auto& n : notes) TLOG_INFO("{}", n);
}

void JobManager::Finish(Job& job, Result<JobReport> report) {
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.report = std::move(report);
  }
  job.done.store(true);
  job.cv.notify_all();
}

Result<std::shared_ptr<JobManager::Job>> JobManager::Find(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> known;
  // Newest first, so a name reused by several jobs finds the latest.
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    if ((*it)->id == name || (*it)->spec.name == name) return *it;
    known.push_back((*it)->id + " (" + (*it)->spec.name + ")");
  }
  return NotFoundError("no job '{}'; jobs: {}", name,
                       known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", ")));
}

Status JobManager::Stop(const std::string& name) {
  ASSIGN_OR_RETURN(std::shared_ptr<Job> job, Find(name));
  std::vector<std::string> notes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job->runner.RequestStop();
    CancelQueued(job);
    notes = StartQueued();  // the jobs behind it may fit
  }
  for (const auto& n : notes) TLOG_INFO("{}", n);
  return Status::Ok();
}

void JobManager::CancelQueued(const std::shared_ptr<Job>& job) {
  auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it == queue_.end()) return;
  queue_.erase(it);
  Finish(*job, CancelledError("job {} was stopped while queued; it never ran", job->id));
}

void JobManager::StopAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& j : jobs_) j->runner.RequestStop();
  while (!queue_.empty()) CancelQueued(queue_.front());
}

Result<JobReport> JobManager::Wait(const std::string& name) {
  ASSIGN_OR_RETURN(std::shared_ptr<Job> job, Find(name));
  std::unique_lock<std::mutex> lock(job->mu);
  job->cv.wait(lock, [&] { return job->report.has_value(); });
  return *job->report;
}

Result<std::vector<JobStatus>> JobManager::Statuses(const std::string& name) {
  if (!name.empty()) {
    ASSIGN_OR_RETURN(std::shared_ptr<Job> job, Find(name));
    return std::vector<JobStatus>{job->Status()};
  }
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs = jobs_;
  }
  std::vector<JobStatus> out;
  for (auto& j : jobs) out.push_back(j->Status());
  return out;
}

std::string JobManager::Metrics() {
  auto all = Statuses("");
  return FormatPrometheus(all.ok() ? *all : std::vector<JobStatus>{});
}

ControlResponse JobManager::Handle(const ControlRequest& req) {
  using Kind = ControlRequest::Kind;
  switch (req.kind) {
    case Kind::kPing: {
      ControlResponse r;
      r.kind = ControlResponse::Kind::kPong;
      r.server = server_;
      r.pid = ::getpid();
      return r;
    }
    case Kind::kStatus: {
      auto st = Statuses(req.job);
      return st.ok() ? Jobs(std::move(*st)) : ControlResponse::Error(st.status());
    }
    case Kind::kSubmit: {
      if (server_ != "daemon")
        return ControlResponse::Error(InvalidArgumentError(
            "this is a `tandem run` process; submit jobs to a daemon (`tandem start`)"));
      if (shutdown_requested())
        return ControlResponse::Error(UnavailableError("the daemon is shutting down"));
      auto spec = ParseJobText(req.text, req.path);
      if (!spec.ok()) return ControlResponse::Error(spec.status());
      if (Status st = check_(*spec); !st.ok()) return ControlResponse::Error(st);
      ControlResponse r;
      r.kind = ControlResponse::Kind::kSubmitted;
      r.job_id = Submit(std::move(*spec));
      return r;
    }
    case Kind::kStop: {
      Status st = Stop(req.job);
      if (!st.ok()) return ControlResponse::Error(st);
      return ControlResponse{};
    }
    case Kind::kShutdown:
      RequestShutdown();
      return ControlResponse{};
    case Kind::kLogs: {
      auto job = Find(req.job);
      if (!job.ok()) return ControlResponse::Error(job.status());
      ControlResponse r;
      r.kind = ControlResponse::Kind::kLogs;
      r.finished = (*job)->done.load();  // read first: lines logged before the end are included
      r.lines = (*job)->logs.Query(req.actor, req.after, req.max_lines, &r.last);
      r.finished = r.finished && r.lines.size() < req.max_lines;  // nothing left unread
      return r;
    }
    case Kind::kClusterJoin:
    case Kind::kClusterHeartbeat:
    case Kind::kClusterLeave:
    case Kind::kKvPut:
    case Kind::kKvGet:
    case Kind::kBarrier:
      return ControlResponse::Error(InvalidArgumentError(
          "this {} is not a cluster head (cluster requests go to node rank 0's head port)",
          server_ == "daemon" ? "daemon" : "`tandem run` process"));
  }
  return ControlResponse::Error(InternalError("unhandled request"));
}

void JobManager::HandleAsync(ControlRequest req, Reply reply) {
  if (req.kind != ControlRequest::Kind::kSubmit) return reply(Handle(req));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return reply(ControlResponse::Error(UnavailableError("the server is stopping")));
    if (submits_.size() >= kMaxQueuedSubmits) {
      return reply(ControlResponse::Error(UnavailableError(
          "busy: {} submitted jobs are waiting to be checked; retry later", submits_.size())));
    }
    submits_.push_back({std::move(req), std::move(reply)});
    if (!submit_thread_.joinable()) submit_thread_ = std::thread([this] { SubmitLoop(); });
  }
  submit_cv_.notify_one();
}

void JobManager::SubmitLoop() {
  log::SetThreadPrefix("submit");
  while (true) {
    QueuedSubmit next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      submit_cv_.wait(lock, [&] { return closing_ || !submits_.empty(); });
      if (submits_.empty()) return;
      next = std::move(submits_.front());
      submits_.pop_front();
      if (closing_) {
        lock.unlock();
        next.reply(ControlResponse::Error(UnavailableError("the server is stopping")));
        continue;
      }
    }
    next.reply(Handle(next.req));
  }
}

void JobManager::RequestShutdown() {
  StopAll();
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

void JobManager::WaitForShutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return shutdown_; });
}

bool JobManager::shutdown_requested() {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

}  // namespace tandem
