#include "runtime/job/job_supervisor.h"

#include <fmt/format.h>

#include "runtime/actor/relaunch.h"
#include "runtime/core/logging.h"
#include "runtime/job/job_metrics.h"

namespace tandem {

void JobSupervisor::RequestStop() {
  stop_requested_.store(true);
  std::lock_guard<std::mutex> lock(completions_->mu);
  completions_->stop = true;
  completions_->cv.notify_all();
}

void JobSupervisor::FailJob(const Status& st) {
  if (status_.ok()) status_ = st;
  built_->env->stop.store(true);
  built_->channels->CloseAll();
}

void JobSupervisor::Launch(size_t index) {
  JobReplica& r = built_->replicas[index];
  JobEnv* env = built_->env.get();
  Result<ActorHandle<JobActor>> h = r.ref.AsBase<JobActor>();
  if (!h.ok()) {
    Settle(index, h.status());
    return;
  }
  std::shared_ptr<Completions> completions = completions_;
  const std::string name = r.result.name;
  CallAcrossRestarts<std::string>(
      r.ref, [h = *h, env] { return h.call(&JobActor::Run, env); },
      [env, name, ref = r.ref](const Status& why) {
        if (env->stopping()) return false;
        const ActorInfo info = ref.Info();
        TLOG_WARN("{} failed ({}); restarted {}/{} times, running it again", name,
                  why.ToString(), info.restarts, info.max_restarts);
        return true;
      },
      [completions, index](Result<std::string> result) {
        std::lock_guard<std::mutex> lock(completions->mu);
        completions->done.emplace_back(index, std::move(result));
        completions->cv.notify_all();
      });
}

void JobSupervisor::Settle(size_t index, Result<std::string> r) {
  JobReplica& d = built_->replicas[index];
  const ActorInfo info = d.ref.Info();
  d.result.restarts = info.restarts;
  if (r.ok()) {
    d.result.summary = *r;
  } else {
    d.result.status = !info.last_error.ok() ? info.last_error : r.status();
    // After a stop request, channels are closed under the actors: Cancelled and Unavailable
    // (a closed channel) are how a graceful stop looks, not failures.
    const StatusCode code = r.status().code();
    const bool stop_effect = code == StatusCode::kCancelled ||
                             (stop_requested_.load() && code == StatusCode::kUnavailable);
    if (!(built_->env->stopping() && stop_effect))
      FailJob(d.result.status.WithContext(d.result.name));
  }
  d.finished = true;
  ++finished_;
  if (auto out = d.group->settings.GetString("out", ""); out.ok() && !out->empty()) {
    // Its lanes end (route = "replica"): readers skip them once drained.
    Status done = built_->channels->FinishProducer(
        *out, built_->job->PortIndex("out", *out, d.group->name, d.replica));
    if (!done.ok()) FailJob(done);
    if (--built_->local_writers[*out] == 0 && !built_->fed_from_other_nodes.contains(*out)) {
      TLOG_DEBUG("all writers of channel '{}' finished: closing it", *out);
      Status closed = built_->channels->Close(*out);
      if (!closed.ok()) FailJob(closed);
    }
  }
}

void JobSupervisor::SampleMetrics() {
  if (built_->metrics->path().empty()) return;
  uint64_t popped = 0;
  std::vector<ChannelStats> cs = built_->channels->Snapshot();
  for (const ChannelStats& c : cs) popped += c.total_popped;
  built_->metrics->Sample(built_->store->Stats(), cs, built_->profile->RollWindow(), popped);
}

std::string JobSupervisor::ProgressLine() const {
  StoreStats s = built_->store->Stats();
  std::string chans;
  for (const auto& c : built_->channels->Snapshot())
    chans += fmt::format(" {}={}/{}", c.name, c.depth, c.capacity);
  return fmt::format("{:.1f}s actors {}/{} done; store {} used, {} objects;{}",
                     SecondsSince(built_->start), finished_, built_->replicas.size(),
                     FormatBytes(s.bytes_used), s.live_objects, chans);
}

Status JobSupervisor::Run() {
  TLOG_INFO("job '{}': {} actors in {} groups, {} channels, store {}", built_->job->name,
            built_->replicas.size(), built_->job->actors.size(), built_->job->channels.size(),
            FormatBytes(built_->store->Stats().capacity));
  for (size_t i = 0; i < built_->replicas.size(); ++i) Launch(i);

  const auto progress_every = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(progress_interval_s_));
  const auto sample_every = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(kMetricsSampleSeconds));
  TimePoint next_progress = SteadyClock::now() + progress_every;
  TimePoint next_sample = SteadyClock::now() + sample_every;
  Completions& c = *completions_;
  while (finished_ < built_->replicas.size()) {
    std::deque<std::pair<size_t, Result<std::string>>> done;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(c.mu);
      c.cv.wait_until(lock, std::min(next_progress, next_sample),
                      [&] { return !c.done.empty() || c.stop; });
      done.swap(c.done);
      stop = c.stop;
      c.stop = false;
    }
    if (stop && !built_->env->stopping()) {
      TLOG_WARN("stop requested: stopping actors");
      built_->env->stop.store(true);
      built_->channels->CloseAll();
    }
    for (auto& [index, result] : done) Settle(index, std::move(result));
    const TimePoint now = SteadyClock::now();
    if (now >= next_progress) {
      next_progress = now + progress_every;
      TLOG_INFO("{}", ProgressLine());
    }
    if (now >= next_sample) {
      next_sample = now + sample_every;
      SampleMetrics();
    }
  }
  Status stopped = built_->system->StopAll();
  if (!stopped.ok()) FailJob(stopped);
  SampleMetrics();
  return status_;
}

}  // namespace tandem
