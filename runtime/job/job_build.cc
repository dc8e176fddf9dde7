#include "runtime/job/job_build.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include <fmt/format.h>

#include "runtime/actor/registry.h"
#include "runtime/job/job_prepare.h"
#include "runtime/job/job_spec_keys.h"
#include "runtime/core/logging.h"

namespace tandem {
namespace {

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

// Locks every exclusive directory of `job` (its checkpoint dirs: job_spec_keys.h) for the
// job's run, so a second job (in this process or another) that names one is refused with
// the directory and the job holding it. A lock left by a killed process is taken over, and
// the log says whose it was.
// Whether this node writes `d`: the node that runs replica 0 of the directory's group (its
// writer: e.g. the drafter's checkpoints) locks it; with the whole job here that is always
// this node. A key that names no group ("actors.GROUP.…") is locked everywhere.
bool WritesHere(const ExclusiveDir& d, const sched::Placement& placement) {
  const std::string prefix = "actors.";
  if (d.key.rfind(prefix, 0) != 0) return true;
  const size_t end = d.key.find('.', prefix.size());
  const std::string group = d.key.substr(prefix.size(), end - prefix.size());
  for (const sched::ReplicaAssignment& r : placement.replicas)
    if (r.group == group && r.replica == 0) return true;
  return false;  // replica 0 of the group runs on another node
}

Result<std::vector<DirLock>> LockExclusiveDirs(const JobSpec& job,
                                               const sched::Placement& placement) {
  std::vector<DirLock> locks;
  for (const ExclusiveDir& d : ExclusiveDirs(job)) {
    if (!WritesHere(d, placement)) continue;
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

Result<sched::Placement> PlaceOnNode(const JobSpec& job, const sched::NodeResources& node) {
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

Result<sched::Placement> PlaceJob(const JobSpec& job, const sched::NodeResources* node,
                                  bool* fake_gpus) {
  sched::NodeResources discovered;
  if (node == nullptr) {
    ASSIGN_OR_RETURN(discovered, sched::DiscoverResources());
    node = &discovered;
  }
  if (fake_gpus != nullptr) *fake_gpus = node->fake_gpus();
  ASSIGN_OR_RETURN(sched::Placement placement, PlaceOnNode(job, *node));
  RETURN_IF_ERROR(CheckPlacedDevices(job, placement, *node));
  RETURN_IF_ERROR(CheckPlacedMemory(job, placement, *node));
  return placement;
}

Result<std::unique_ptr<BuiltJob>> BuildJob(const JobSpec& job, const sched::Placement& placement,
                                           BuildOptions options) {
  // The groups of the placement, in job order, each with the slots placed here.
  std::map<std::string, std::vector<ActorSystem::ReplicaSlot>> slots;
  for (const sched::ReplicaAssignment& r : placement.replicas) {
    if (job.FindGroup(r.group) == nullptr) {
      return InvalidArgumentError("{}: the placement has replica {} of group '{}', which the "
                                  "job does not have", job.path, r.replica, r.group);
    }
    slots[r.group].push_back({r.replica, r.gpus.empty() ? -1 : r.gpus[0]});
  }

  auto built = std::make_unique<BuiltJob>();
  built->job = &job;
  built->placement = placement;
  built->start = options.start.value_or(SteadyClock::now());
  // Held until the actors have stopped (declared before them).
  ASSIGN_OR_RETURN(built->dir_locks, LockExclusiveDirs(job, placement));

  StoreOptions so;
  so.name = job.name;
  so.capacity_bytes = static_cast<uint64_t>(job.store_bytes);
  ASSIGN_OR_RETURN(built->store, ObjectStore::Open(so));
  built->channels = std::make_unique<ChannelRegistry>();
  for (const auto& c : job.channels) {
    ChannelOptions co;
    co.capacity = static_cast<size_t>(c.capacity);
    co.min_ready = static_cast<size_t>(c.min_ready);
    ASSIGN_OR_RETURN(co.route, ParseChannelRoute(c.route));
    co.producers = std::max(job.PortReplicas("out", c.name), 1);
    co.consumers = std::max(job.PortReplicas("in", c.name), 1);
    RETURN_IF_ERROR(built->channels->Declare(c.name, co));
  }
  built->profile = std::make_unique<ProfileStats>(job.name);
  ASSIGN_OR_RETURN(Duration interval,
                   ResolveProfileInterval(job.profile_interval_s > 0
                                              ? std::optional<double>(job.profile_interval_s)
                                              : std::nullopt));
  built->reporter = std::make_unique<ProfileReporter>(built->profile.get(), interval);
  built->metrics = std::make_unique<JobMetrics>(&job, built->start);

  built->env = std::make_unique<JobEnv>();
  JobEnv& env = *built->env;
  env.metrics = built->metrics.get();
  env.job = &job;
  env.store = built->store.get();
  env.channels = built->channels.get();
  env.profile = built->profile.get();
  env.registry = options.registry != nullptr ? std::move(options.registry)
                                             : std::make_shared<JobRegistry>();
  static std::atomic<uint64_t> next_run_id{1};
  env.run_id = next_run_id.fetch_add(1);
  RETURN_IF_ERROR(PrepareJob(job, *env.registry));

  ActorSystem::Options sys_opts;
  sys_opts.node = options.node;
  // Run() occupies a thread for the whole job.
  sys_opts.cpu_threads = static_cast<int>(placement.replicas.size()) + 1;
  built->system = std::make_unique<ActorSystem>(sys_opts);

  for (const auto& g : job.actors) {
    auto it = slots.find(g.name);
    if (it == slots.end()) continue;
    ASSIGN_OR_RETURN(std::vector<ActorRef> refs,
                     built->system->SpawnReplicas(g.name, g.settings, it->second,
                                                  options.make_device_current));
    for (size_t i = 0; i < refs.size(); ++i) {
      JobReplica r;
      r.ref = refs[i];
      r.group = &g;
      r.replica = it->second[i].replica;
      r.result.name = refs[i].name();
      built->replicas.push_back(std::move(r));
    }
    if (auto out = g.settings.GetString("out", ""); out.ok() && !out->empty())
      built->local_writers[*out] += static_cast<int>(refs.size());
  }
  return built;
}

}  // namespace tandem
