#include "runtime/job/runner.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "runtime/actor/plugin.h"
#include "runtime/actor/registry.h"
#include "runtime/actor/system.h"
#include "runtime/job/job_actor.h"
#include "runtime/job/job_spec_keys.h"
#include "runtime/core/clock.h"
#include "runtime/core/dir_lock.h"
#include "runtime/core/logging.h"
#include "runtime/profile/profile_reporter.h"
#include "runtime/sched/placement.h"

namespace tandem {

struct JobRunner::Live {
  const JobSpec* job = nullptr;
  const ActorSystem* system = nullptr;
  const ChannelRegistry* channels = nullptr;
  const ObjectStore* store = nullptr;
  ProfileStats* profile = nullptr;
  const JobMetrics* metrics = nullptr;
  TimePoint start;
};

namespace {

// One actor replica being driven by the runner.
struct Driven {
  ActorRef ref;
  const ActorGroupSpec* group = nullptr;
  int replica = 0;  // within the group
  std::optional<Future<std::string>> run;
  ActorResult result;
  bool finished = false;
};

Status CheckClasses(const JobSpec& job) {
  std::vector<std::string> known = ActorRegistry::Global().Names();
  for (const auto& g : job.actors) {
    if (ActorRegistry::Global().Find(g.class_name).ok()) continue;
    std::string hint = DidYouMean(g.class_name, known);
    return InvalidArgumentError("{}: actors.{}: unknown actor class '{}'{}; known classes: {}",
                                g.where, g.name, g.class_name,
                                hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                                fmt::join(known, ", "));
  }
  return Status::Ok();
}

std::optional<ActorInfo> InfoOf(const ActorSystem& system, const std::string& name) {
  for (auto& info : system.Snapshot())
    if (info.name == name) return info;
  return std::nullopt;
}

std::string ProgressLine(const JobEnv& env, const std::vector<Driven>& actors, double secs) {
  StoreStats s = env.store->Stats();
  std::string chans;
  for (const auto& c : env.channels->Snapshot())
    chans += fmt::format(" {}={}/{}", c.name, c.depth, c.capacity);
  int done = 0;
  for (const auto& a : actors) done += a.finished;
  return fmt::format("{:.1f}s actors {}/{} done; store {} used, {} objects;{}", secs, done,
                     actors.size(), FormatBytes(s.bytes_used), s.live_objects, chans);
}


// Replicas of `job` that write (`out`) or read (`in`) channel `name`.
int Ports(const JobSpec& job, const std::string& port, const std::string& name) {
  int n = 0;
  for (const auto& g : job.actors)
    if (auto v = g.settings.GetString(port, ""); v.ok() && *v == name) n += static_cast<int>(g.replicas);
  return n;
}

JobStatus BuildStatus(const JobRunner::Live& live, const ProfileSnapshot& snap) {
  JobStatus st;
  st.name = live.job->name;
  st.state = "running";
  st.seconds = SecondsSince(live.start);
  for (const ActorInfo& info : live.system->Snapshot()) {
    ActorStatus a;
    a.name = info.name;
    a.class_name = info.class_name;
    size_t slash = info.name.rfind('/');
    a.group = info.name.substr(0, slash);
    if (slash != std::string::npos) a.replica = std::atoi(info.name.c_str() + slash + 1);
    a.gpu = info.gpu;
    a.state = std::string(ActorStateName(info.state));
    a.restarts = info.restarts;
    a.max_restarts = info.max_restarts;
    a.mailbox_depth = info.mailbox_depth;
    a.messages_done = info.messages_done;
    a.stage = info.stage;
    a.last_error = info.last_error.ok() ? "" : info.last_error.ToString();
    st.actors.push_back(std::move(a));
  }
  for (const ChannelStats& c : live.channels->Snapshot()) {
    st.channels.push_back({c.name, c.depth, c.capacity, c.min_ready, c.max_depth, c.total_pushed,
                           c.total_popped, c.closed, c.push_wait_total_ns * 1e-9,
                           c.pop_wait_total_ns * 1e-9, Ports(*live.job, "out", c.name),
                           Ports(*live.job, "in", c.name)});
    st.items_done += c.total_popped;
  }
  for (const auto& g : live.job->actors) {
    auto out = g.settings.GetString("out", "");
    auto objects = g.settings.GetInt("objects", 0);
    if (out.ok() && !out->empty() && objects.ok()) st.items_total += *objects * g.replicas;
  }
  st.items_per_s = st.seconds > 0 ? static_cast<double>(st.items_done) / st.seconds : 0;
  StoreStats s = live.store->Stats();
  st.store = {s.capacity, s.bytes_used, s.high_water, s.live_objects, s.inflight_copies,
              s.local.refs, s.channel.refs, s.HoldersSummary()};
  // Cumulative timings over the job's wall time, as in the final report.
  ProfileSnapshot table = snap;
  const double wall_ns = st.seconds * 1e9;
  for (StageReport& r : table.stages) {
    r.window = r.cumulative;
    r.percent_of_wall = wall_ns > 0 ? 100.0 * static_cast<double>(r.cumulative.total_ns) / wall_ns : 0;
    const StageStats& c = r.cumulative;
    st.stages.push_back({r.name, c.count, c.total_ns * 1e-9, c.mean_ns * 1e-6, c.p50_ns * 1e-6,
                         c.p99_ns * 1e-6, r.percent_of_wall});
  }
  table.window_start_ns = table.window_end_ns - static_cast<int64_t>(wall_ns);
  st.profile_table = FormatProfileTable(table);
  st.verdict = BottleneckVerdict(st);
  if (live.metrics != nullptr) st.training = live.metrics->Training();
  return st;
}

// Each class's device check (KeyTable::SetDeviceCheck) against every GPU its group's
// replicas were placed on, so settings a GPU cannot run (FP8 below sm_90) are refused when
// the job is validated, before any actor starts.
Status CheckPlacedDevices(const JobSpec& job, const sched::Placement& placement,
                          const sched::NodeResources& node) {
  for (const sched::ReplicaAssignment& r : placement.replicas) {
    auto group = std::find_if(job.actors.begin(), job.actors.end(),
                              [&](const ActorGroupSpec& g) { return g.name == r.group; });
    if (group == job.actors.end() || r.gpus.empty()) continue;
    Result<ActorClass> cls = ActorRegistry::Global().Find(group->class_name);
    if (!cls.ok() || cls->keys == nullptr) continue;
    for (int index : r.gpus) {
      auto gpu = std::find_if(node.gpus.begin(), node.gpus.end(),
                              [&](const sched::GpuInfo& g) { return g.index == index; });
      if (gpu == node.gpus.end()) continue;
      RETURN_IF_ERROR(cls->keys
                          ->CheckDevice(group->settings, "actors." + group->name,
                                        PlacedGpu{gpu->index, gpu->name, gpu->compute_capability})
                          .WithContext(fmt::format("{}: replica {} of actors.{} on GPU {}",
                                                   job.path, r.replica, group->name, index)));
    }
  }
  return Status::Ok();
}

// The classes' device-memory lower bounds (KeyTable::SetDeviceBytesEstimate) of the replicas
// that share each GPU, added up: a GPU that cannot hold them is refused now, not after an
// actor has loaded tens of GB and run out. Replicas spread over several GPUs are not
// counted (how they split is the class's business).
Status CheckPlacedMemory(const JobSpec& job, const sched::Placement& placement,
                         const sched::NodeResources& node) {
  struct Use {
    uint64_t bytes = 0;
    std::vector<std::string> parts;
  };
  std::map<int, Use> per_gpu;
  std::map<std::string, KeyTable::DeviceBytes> per_group;  // one estimate per group
  std::map<int, std::set<std::string>> groups_on;          // the groups with a replica there
  for (const sched::ReplicaAssignment& r : placement.replicas)
    for (int g : r.gpus) groups_on[g].insert(r.group);
  for (const sched::ReplicaAssignment& r : placement.replicas) {
    if (r.gpus.size() != 1) continue;
    auto group = std::find_if(job.actors.begin(), job.actors.end(),
                              [&](const ActorGroupSpec& g) { return g.name == r.group; });
    if (group == job.actors.end()) continue;
    Result<ActorClass> cls = ActorRegistry::Global().Find(group->class_name);
    if (!cls.ok() || cls->keys == nullptr) continue;
    if (!per_group.count(r.group)) {
      Result<KeyTable::DeviceBytes> est =
          cls->keys->EstimateDeviceBytes(group->settings, JobSectionContext(job, r.group));
      if (!est.ok()) return est.status().WithContext(job.path);
      per_group[r.group] = *est;
    }
    const KeyTable::DeviceBytes& est = per_group[r.group];
    const bool alone = !est.unless_group.empty() && est.alone_bytes > 0 &&
                       !groups_on[r.gpus[0]].count(est.unless_group);
    const uint64_t bytes = est.bytes + (alone ? est.alone_bytes : 0);
    if (bytes == 0) continue;
    Use& use = per_gpu[r.gpus[0]];
    use.bytes += bytes;
    use.parts.push_back(
        fmt::format("{}/{} {} ({}{})", r.group, r.replica, FormatBytes(bytes), est.what,
                    alone ? fmt::format("; no {} replica on this GPU: {} {}", est.unless_group,
                                        est.alone_what, FormatBytes(est.alone_bytes))
                          : std::string()));
  }
  for (const auto& [index, use] : per_gpu) {
    auto gpu = std::find_if(node.gpus.begin(), node.gpus.end(),
                            [&](const sched::GpuInfo& g) { return g.index == index; });
    if (gpu == node.gpus.end() || gpu->memory_bytes == 0 || use.bytes <= gpu->memory_bytes)
      continue;
    return InvalidArgumentError(
        "{}: GPU {} ({}, {}) cannot hold what is placed on it: at least {} ({}); use a GPU "
        "with more memory, give the groups GPUs of their own (gpus = 1), or a smaller model", job.path, index, gpu->name,
        FormatBytes(gpu->memory_bytes), FormatBytes(use.bytes), fmt::join(use.parts, ", "));
  }
  return Status::Ok();
}

// Places the job's groups on `node` (all of this node's resources when null) and checks the
// placed GPUs against the classes' device checks and device-memory bounds.
Result<sched::Placement> PlaceJob(const JobSpec& job, const sched::NodeResources* node,
                                  bool* fake_gpus) {
  sched::NodeResources discovered;
  if (node == nullptr) {
    ASSIGN_OR_RETURN(discovered, sched::DiscoverResources());
    node = &discovered;
  }
  *fake_gpus = node->fake_gpus();
  ASSIGN_OR_RETURN(sched::Placement placement, JobRunner::PlaceOn(job, *node));
  RETURN_IF_ERROR(CheckPlacedDevices(job, placement, *node));
  RETURN_IF_ERROR(CheckPlacedMemory(job, placement, *node));
  return placement;
}

// Locks every exclusive directory of `job` (its checkpoint dirs: job_spec_keys.h) for the
// job's run, so a second job (in this process or another) that names one is refused with
// the directory and the job holding it. A lock left by a killed process is taken over, and
// the log says whose it was.
Result<std::vector<DirLock>> LockExclusiveDirs(const JobSpec& job) {
  std::vector<DirLock> locks;
  for (const ExclusiveDir& d : ExclusiveDirs(job)) {
    std::string took_over;
    Result<DirLock> lock = DirLock::Acquire(
        d.path, fmt::format("job '{}' ({})", job.name, job.path), d.key, &took_over);
    if (!lock.ok()) return lock.status().WithContext(job.path);
    if (!took_over.empty()) TLOG_WARN("{}", took_over);
    locks.push_back(std::move(*lock));
  }
  return locks;
}

}  // namespace

std::string JobReport::ToString() const {
  std::string out = fmt::format("job '{}' {} in {:.2f}s\n", job_name,
                                status.ok() ? "finished" : "FAILED", seconds);
  for (const auto& a : actors) {
    out += fmt::format("  {:<16} {}{}{}\n", a.name, a.status.ok() ? a.summary : a.status.ToString(),
                       a.restarts ? fmt::format(" (restarted {}x)", a.restarts) : "", "");
  }
  for (const auto& c : channels) {
    out += fmt::format("  channel {:<10} pushed {} popped {} max depth {}/{}\n", c.name, c.total_pushed,
                       c.total_popped, c.max_depth, c.capacity);
  }
  out += fmt::format("  store: {} live objects, {} used at end, high-water {} of {}\n",
                     store.live_objects, FormatBytes(store.bytes_used),
                     FormatBytes(store.high_water), FormatBytes(store.capacity));
  if (!profile_table.empty()) out += profile_table;
  if (!status.ok()) out += fmt::format("  error: {}\n", status.ToString());
  return out;
}

Result<sched::Placement> JobRunner::PlaceOn(const JobSpec& job, const sched::NodeResources& node) {
  std::vector<sched::GroupRequest> requests;
  for (const auto& g : job.actors) {
    ASSIGN_OR_RETURN(sched::GroupRequest r, sched::GroupRequestFromConfig(g.name, g.settings));
    // No pinned_bytes: what the class says its replicas need (KeyTable::SetPinnedDefault).
    Result<ActorClass> cls = ActorRegistry::Global().Find(g.class_name);
    if (g.settings.Find("pinned_bytes") == nullptr && cls.ok() && cls->keys != nullptr) {
      Result<uint64_t> pinned = cls->keys->DefaultPinnedBytes(g.settings,
                                                              JobSectionContext(job, g.name));
      if (!pinned.ok()) return pinned.status().WithContext(job.path);
      r.pinned_bytes = *pinned;
    }
    requests.push_back(std::move(r));
  }
  auto placed = sched::Place(node, requests);
  if (!placed.ok()) return placed.status().WithContext(job.path);
  // Place counts GPUs by position in node.gpus; a replica needs the device's own index.
  for (sched::ReplicaAssignment& r : placed->replicas)
    for (int& g : r.gpus) g = node.gpus[static_cast<size_t>(g)].index;
  return placed;
}

Status JobRunner::Check(const JobSpec& job, std::vector<std::string>* notes,
                        const sched::NodeResources* node) {
  for (const auto& plugin : job.plugins) {
    auto loaded = LoadPlugin(plugin);
    if (!loaded.ok()) return loaded.status().WithContext(fmt::format("{}: plugin", job.path));
    TLOG_DEBUG("plugin {}: {}", plugin, fmt::join(*loaded, ", "));
  }
  RETURN_IF_ERROR(CheckClasses(job));
  RETURN_IF_ERROR(CheckActorSections(job, notes));
  bool fake_gpus = false;
  return PlaceJob(job, node, &fake_gpus).status();
}

void JobRunner::RequestStop() { stop_requested_.store(true); }

JobStatus JobRunner::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  if (final_) return *final_;
  if (live_ == nullptr) {
    JobStatus st;
    st.state = "pending";
    return st;
  }
  JobStatus st = BuildStatus(*live_, live_->profile->RollWindow());
  if (stop_requested_.load()) st.state = "stopping";
  return st;
}

Result<JobReport> JobRunner::Run(const JobSpec& job) {
  const TimePoint start = SteadyClock::now();
  RETURN_IF_ERROR(Check(job, nullptr, options_.resources ? &*options_.resources : nullptr));
  bool fake_gpus = false;
  ASSIGN_OR_RETURN(sched::Placement placement,
                   PlaceJob(job, options_.resources ? &*options_.resources : nullptr, &fake_gpus));
  // Held until the actors have stopped (declared before them).
  ASSIGN_OR_RETURN(std::vector<DirLock> dir_locks, LockExclusiveDirs(job));

  StoreOptions so;
  so.name = job.name;
  so.capacity_bytes = static_cast<uint64_t>(job.store_bytes);
  ASSIGN_OR_RETURN(std::unique_ptr<ObjectStore> store, ObjectStore::Open(so));
  auto channels_owner = std::make_unique<ChannelRegistry>();
  ChannelRegistry& channels = *channels_owner;
  for (const auto& c : job.channels) {
    ChannelOptions co;
    co.capacity = static_cast<size_t>(c.capacity);
    co.min_ready = static_cast<size_t>(c.min_ready);
    ASSIGN_OR_RETURN(co.route, ParseChannelRoute(c.route));
    co.producers = std::max(job.PortReplicas("out", c.name), 1);
    co.consumers = std::max(job.PortReplicas("in", c.name), 1);
    RETURN_IF_ERROR(channels.Declare(c.name, co));
  }
  ProfileStats profile(job.name);
  ASSIGN_OR_RETURN(Duration interval,
                   ResolveProfileInterval(job.profile_interval_s > 0
                                              ? std::optional<double>(job.profile_interval_s)
                                              : std::nullopt));
  auto reporter = std::make_unique<ProfileReporter>(&profile, interval);

  JobMetrics metrics(&job, start);
  JobEnv env;
  env.metrics = &metrics;
  env.job = &job;
  env.store = store.get();
  env.channels = &channels;
  env.profile = &profile;
  env.registry = options_.registry != nullptr ? options_.registry
                                              : std::make_shared<JobRegistry>();
  static std::atomic<uint64_t> next_run_id{1};
  env.run_id = next_run_id.fetch_add(1);

  int replicas = 0;
  for (const auto& g : job.actors) replicas += static_cast<int>(g.replicas);
  ActorSystem::Options sys_opts;
  sys_opts.cpu_threads = replicas + 1;  // Run() occupies a thread for the whole job
  ActorSystem system(sys_opts);

  std::vector<Driven> actors;
  for (const auto& g : job.actors) {
    ASSIGN_OR_RETURN(std::vector<ActorRef> refs, system.SpawnGroup(g.name, g.settings, placement.GpusOf(g.name), !fake_gpus));
    for (auto& r : refs) {
      Driven d;
      d.ref = r;
      d.group = &g;
      d.replica = static_cast<int>(&r - refs.data());
      d.result.name = r.name();
      actors.push_back(std::move(d));
    }
  }
  Live live{&job, &system, &channels, store.get(), &profile, &metrics, start};
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ = &live;
  }
  TLOG_INFO("job '{}': {} actors in {} groups, {} channels, store {}", job.name, actors.size(),
            job.actors.size(), job.channels.size(), FormatBytes(so.capacity_bytes));

  auto launch = [&](Driven& d) -> Status {
    ASSIGN_OR_RETURN(ActorHandle<JobActor> h, d.ref.AsBase<JobActor>());
    d.run = h.call(&JobActor::Run, &env);
    return Status::Ok();
  };
  JobReport report;
  report.job_name = job.name;
  auto fail_job = [&](Status st) {
    if (report.status.ok()) report.status = st;
    env.stop.store(true);
    channels.CloseAll();
  };
  for (auto& d : actors) {
    Status st = launch(d);
    if (!st.ok()) fail_job(st);
  }

  std::map<std::string, int> unfinished_writers;  // channel -> replicas still writing
  for (const auto& g : job.actors)
    if (auto out = g.settings.GetString("out", ""); out.ok() && !out->empty())
      unfinished_writers[*out] += static_cast<int>(g.replicas);

  TimePoint last_progress = SteadyClock::now();
  TimePoint last_sample = SteadyClock::now();
  auto sample_metrics = [&] {
    last_sample = SteadyClock::now();
    if (metrics.path().empty()) return;
    uint64_t popped = 0;
    std::vector<ChannelStats> cs = channels.Snapshot();
    for (const ChannelStats& c : cs) popped += c.total_popped;
    metrics.Sample(store->Stats(), cs, profile.RollWindow(), popped);
  };
  size_t finished = 0;
  while (finished < actors.size()) {
    if (stop_requested_.load() && !env.stopping()) {
      TLOG_WARN("stop requested: stopping actors");
      env.stop.store(true);
      channels.CloseAll();
    }
    bool progressed = false;
    for (auto& d : actors) {
      if (d.finished || !d.run || !d.run->ready()) continue;
      progressed = true;
      Result<std::string> r = d.run->Get();
      d.run.reset();
      std::optional<ActorInfo> info = InfoOf(system, d.result.name);
      if (info) d.result.restarts = info->restarts;
      if (r.ok()) {
        d.result.summary = *r;
      } else if (info && !IsTerminal(info->state) && !env.stopping() &&
                 r.status().code() != StatusCode::kCancelled) {
        TLOG_WARN("{} failed ({}); restarted {}/{} times, running it again", d.result.name,
                  r.status().ToString(), info->restarts, info->max_restarts);
        Status st = launch(d);
        if (st.ok()) continue;
        r = st;
      }
      if (!r.ok()) {
        d.result.status = info && !info->last_error.ok() ? info->last_error : r.status();
        // After a stop request, channels are closed under the actors: Cancelled and
        // Unavailable (a closed channel) are how a graceful stop looks, not failures.
        const StatusCode code = r.status().code();
        const bool stop_effect = code == StatusCode::kCancelled ||
                                 (stop_requested_.load() && code == StatusCode::kUnavailable);
        if (!(env.stopping() && stop_effect)) fail_job(d.result.status.WithContext(d.result.name));
      }
      d.finished = true;
      ++finished;
      if (auto out = d.group->settings.GetString("out", ""); out.ok() && !out->empty()) {
        // Its lanes end (route = "replica"): readers skip them once drained.
        Status done =
            channels.FinishProducer(*out, job.PortIndex("out", *out, d.group->name, d.replica));
        if (!done.ok()) fail_job(done);
        if (--unfinished_writers[*out] == 0) {
          TLOG_DEBUG("all writers of channel '{}' finished: closing it", *out);
          Status closed = channels.Close(*out);
          if (!closed.ok()) fail_job(closed);
        }
      }
    }
    if (SecondsSince(last_progress) >= options_.progress_interval_s) {
      last_progress = SteadyClock::now();
      TLOG_INFO("{}", ProgressLine(env, actors, SecondsSince(start)));
    }
    if (SecondsSince(last_sample) >= kMetricsSampleSeconds) sample_metrics();
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  Status stop_st = system.StopAll();
  if (!stop_st.ok()) fail_job(stop_st);
  sample_metrics();
  reporter->Stop();
  ProfileSnapshot snap = profile.RollWindow();
  JobStatus final_status = BuildStatus(live, snap);
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ = nullptr;
  }
  for (auto& d : actors) {
    if (std::optional<ActorInfo> info = InfoOf(system, d.result.name)) {
      d.result.restarts = info->restarts;
    }
    report.actors.push_back(d.result);
  }
  report.channels = channels.Snapshot();
  // Items left in channels (a failed or stopped job) are dropped with them, releasing refs.
  channels_owner.reset();
  report.store = store->Stats();
  if (report.store.live_objects != 0 && report.status.ok()) {
    report.status = InternalError("{} objects ({}) still live in the store after the job",
                                  report.store.live_objects,
                                  FormatBytes(report.store.bytes_used));
  }
  // The whole run, not the last window: cumulative stats over the job's wall time.
  const double wall_ns = SecondsSince(start) * 1e9;
  for (StageReport& r : snap.stages) {
    r.window = r.cumulative;
    r.percent_of_wall = wall_ns > 0 ? 100.0 * static_cast<double>(r.cumulative.total_ns) / wall_ns : 0;
  }
  snap.window_start_ns = snap.window_end_ns - static_cast<int64_t>(wall_ns);
  report.profile_table = FormatProfileTable(snap);
  report.seconds = SecondsSince(start);
  final_status.store = {report.store.capacity,     report.store.bytes_used,
                        report.store.high_water,   report.store.live_objects,
                        report.store.inflight_copies, report.store.local.refs,
                        report.store.channel.refs, report.store.HoldersSummary()};
  final_status.state = !report.status.ok() ? "failed" : stop_requested_.load() ? "stopped" : "succeeded";
  final_status.error = report.status.ok() ? "" : report.status.ToString();
  metrics.End(final_status.state, final_status.error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    final_ = std::move(final_status);
  }
  return report;
}

}  // namespace tandem
