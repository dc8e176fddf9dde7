#include "runtime/actor/system.h"

#include <algorithm>
#include <thread>

#include <fmt/ranges.h>

#include "runtime/core/logging.h"

namespace tandem {
namespace {

int PoolSize(int requested) {
  if (requested > 0) return requested;
  return std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
}

// "drafter/1" -> group "drafter", replica 1; a plain name is its own group, replica 0.
void SplitName(const std::string& name, ActorContext* ctx) {
  ctx->group = name;
  ctx->replica = 0;
  size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash + 1 == name.size()) return;
  std::string tail = name.substr(slash + 1);
  if (!std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return;
  }
  ctx->group = name.substr(0, slash);
  ctx->replica = std::stoi(tail);
}

}  // namespace

ActorSystem::ActorSystem(Options options)
    : options_(options), pool_("actors", PoolSize(options.cpu_threads)) {}

ActorSystem::~ActorSystem() {
  Status st = StopAll(Duration::max());
  if (!st.ok()) TLOG_ERROR("stopping the actor system: {}", st.ToString());
  timers_.Shutdown();
  pool_.Shutdown();
  std::map<uint64_t, std::unique_ptr<PinnedThread>> pinned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pinned.swap(pinned_);
  }
  for (auto& [id, thread] : pinned) thread->Shutdown();
}

Executor* ActorSystem::ExecutorFor(const ActorContext& ctx, const ActorOptions& options) {
  if (options.gpu < 0) return &pool_;
  auto thread = std::make_unique<PinnedThread>(fmt::format("{}@gpu{}", ctx.name, options.gpu),
                                               options.gpu, options.make_device_current);
  PinnedThread* raw = thread.get();
  std::lock_guard<std::mutex> lock(mu_);
  pinned_[ctx.address.id] = std::move(thread);
  return raw;
}

void ActorSystem::Forget(const ActorAddress& address, const std::string& name) {
  std::unique_ptr<PinnedThread> thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    names_.erase(name);
    std::erase_if(cells_, [&](const auto& c) { return c->context().address == address; });
    if (auto it = pinned_.find(address.id); it != pinned_.end()) {
      thread = std::move(it->second);
      pinned_.erase(it);
    }
  }
  if (thread) thread->Shutdown();
}

Result<ActorRef> ActorSystem::Spawn(const ActorClass& cls, std::string name,
                                    const ConfigValue& section, ActorOptions options) {
  if (name.empty()) return InvalidArgumentError("an actor needs a name (class '{}')", cls.name);
  if (options.max_restarts < 0) {
    return InvalidArgumentError("actor '{}': max_restarts must be >= 0, got {}", name,
                                options.max_restarts);
  }
  ActorContext ctx;
  ctx.name = name;
  SplitName(name, &ctx);
  ctx.class_name = cls.name;
  ctx.gpu = options.gpu;
  ctx.system = this;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!names_.insert(name).second) {
      return InvalidArgumentError("an actor named '{}' already exists", name);
    }
    ctx.address = ActorAddress{options_.node, next_id_++};
  }
  const ActorAddress address = ctx.address;
  Executor* executor = ExecutorFor(ctx, options);
  auto cell = std::make_shared<internal::ActorCell>(
      std::move(ctx), options, cls.type, cls.factory, section, executor, &timers_,
      [this](const ActorInfo& info) { OnFailure(info); });
  Status created = options.gpu >= 0 ? static_cast<PinnedThread*>(executor)->init_status()
                                    : Status::Ok();
  if (created.ok()) created = cell->Create();
  if (!created.ok()) {
    Forget(address, name);
    if (options.gpu < 0) return created;
    return created.WithContext(fmt::format("actor '{}' on GPU {}", name, options.gpu));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    cells_.push_back(cell);
  }
  cell->Start();
  return ActorRef(cell);
}

Result<ActorRef> ActorSystem::Spawn(std::string_view class_name, std::string name,
                                    const ConfigValue& section, ActorOptions options) {
  ASSIGN_OR_RETURN(ActorClass cls, ActorRegistry::Global().Find(class_name));
  return Spawn(cls, std::move(name), section, options);
}

const KeyTable& ActorGroupKeys() {
  static const KeyTable* keys = [] {
    auto* t = new KeyTable("actors.NAME", "keys of every actor group, whatever its class");
    t->String("class", "registered actor class (`dflash.target`, or a plugin's)").Required();
    t->Int("replicas", "copies of the actor, named NAME/0, NAME/1, ...").Default(1).Range(1, 4096);
    t->Number("gpus", "GPUs per replica: 0, a share in (0, 1) such as 0.5, or a whole number")
        .Default(0.0).Range(0, 1024);
    t->Number("cpus", "CPU slots per replica, counted against the node's hardware threads")
        .Default(0.0).Range(0, 65536);
    // No fixed default: a class may size it when absent (KeyTable::SetPinnedDefault).
    t->Int("pinned_bytes", "pinned host memory per replica, for placement")
        .Min(0).DefaultIs("0, or the class's (a dflash.drafter's: its checkpoint snapshot)");
    t->IntArray("nodes", "in a job across several nodes: the node ranks its replicas may run "
                "on (e.g. [0]); a job in one process ignores it")
        .Min(0).Max(65535).DefaultIs("every node");
    t->Int("max_restarts", "restarts allowed after a failure before the job fails")
        .Default(0).Range(0, 1000000);
    t->Number("restart_backoff_s", "delay before the first restart in seconds; it doubles per "
              "restart up to max(5 s, this)").Default(0.1).Range(0, 600);
    return t;
  }();
  return *keys;
}

Result<std::vector<ActorRef>> ActorSystem::SpawnGroup(const std::string& group,
                                                      const ConfigValue& section,
                                                      const std::vector<int>& gpus,
                                                      bool make_device_current) {
  const KeyTable& keys = ActorGroupKeys();
  RETURN_IF_ERROR(keys.Check(section, "actors." + group, nullptr, /*unknown_ok=*/true));
  const int64_t replicas = keys.GetInt(section, "replicas");
  if (!gpus.empty() && static_cast<int64_t>(gpus.size()) != replicas) {
    return InvalidArgumentError("actors.{}: {} replicas but {} GPU assignments", group, replicas,
                                gpus.size());
  }
  std::vector<ReplicaSlot> slots;
  for (int64_t i = 0; i < replicas; ++i)
    slots.push_back({static_cast<int>(i), gpus.empty() ? -1 : gpus[static_cast<size_t>(i)]});
  return SpawnReplicas(group, section, slots, make_device_current);
}

Result<std::vector<ActorRef>> ActorSystem::SpawnReplicas(const std::string& group,
                                                         const ConfigValue& section,
                                                         const std::vector<ReplicaSlot>& slots,
                                                         bool make_device_current) {
  const KeyTable& keys = ActorGroupKeys();
  RETURN_IF_ERROR(keys.Check(section, "actors." + group, nullptr, /*unknown_ok=*/true));
  const std::string class_name = keys.GetString(section, "class");
  const int64_t replicas = keys.GetInt(section, "replicas");
  const int64_t max_restarts = keys.GetInt(section, "max_restarts");
  const auto backoff = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(keys.GetNumber(section, "restart_backoff_s")));
  std::set<int> seen;
  for (const ReplicaSlot& slot : slots) {
    if (slot.replica < 0 || slot.replica >= replicas) {
      return InvalidArgumentError("actors.{}: replica {} is outside the group's {} replicas",
                                  group, slot.replica, replicas);
    }
    if (!seen.insert(slot.replica).second)
      return InvalidArgumentError("actors.{}: replica {} listed twice", group, slot.replica);
  }
  ASSIGN_OR_RETURN(ActorClass cls, ActorRegistry::Global().Find(class_name));
  std::vector<ActorRef> refs;
  for (const ReplicaSlot& slot : slots) {
    ActorOptions opts;
    opts.gpu = slot.gpu;
    opts.make_device_current = make_device_current;
    opts.max_restarts = static_cast<int>(max_restarts);
    opts.restart_backoff = backoff;
    opts.max_restart_backoff = std::max(opts.max_restart_backoff, backoff);
    Result<ActorRef> ref = Spawn(cls, fmt::format("{}/{}", group, slot.replica), section, opts);
    if (!ref.ok()) {
      for (const ActorRef& r : refs) {
        Status st = Stop(r.name());
        if (!st.ok()) TLOG_WARN("rolling back group '{}': {}", group, st.ToString());
      }
      for (const ActorRef& r : refs) Forget(r.address(), r.name());
      const std::string& loc = section.location();
      return ref.status().WithContext(
          fmt::format("{}actors.{}", loc.empty() ? "" : loc + ": ", group));
    }
    refs.push_back(*ref);
  }
  return refs;
}

Result<ActorRef> ActorSystem::Lookup(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> known;
  for (const auto& c : cells_) {
    if (c->context().name == name) return ActorRef(c);
    known.push_back(c->context().name);
  }
  return NotFoundError("no actor named '{}' (actors: {})", name,
                       known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
}

std::vector<ActorInfo> ActorSystem::Snapshot() const {
  std::vector<std::shared_ptr<internal::ActorCell>> cells;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cells = cells_;
  }
  std::vector<ActorInfo> out;
  out.reserve(cells.size());
  for (const auto& c : cells) out.push_back(c->Info());
  return out;
}

void ActorSystem::SetFailureHook(FailureHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hook_ = std::move(hook);
}

void ActorSystem::OnFailure(const ActorInfo& info) {
  FailureHook hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = hook_;
  }
  if (hook) hook(info);
}

Status ActorSystem::WaitStopped(const std::vector<std::shared_ptr<internal::ActorCell>>& cells,
                                TimePoint deadline) {
  std::vector<std::string> running;
  for (const auto& c : cells) {
    bool done = deadline == TimePoint::max() ? c->WaitTerminal(std::nullopt)
                                             : c->WaitTerminal(deadline);
    if (!done) {
      ActorInfo info = c->Info();
      running.push_back(fmt::format("{} ({}, stage '{}', {} queued)", info.name,
                                    ActorStateName(info.state), info.stage, info.mailbox_depth));
    }
  }
  if (running.empty()) return Status::Ok();
  return DeadlineExceededError("actors still running at the stop deadline: {}",
                               fmt::join(running, ", "));
}

Status ActorSystem::Stop(std::string_view name, Duration timeout) {
  std::shared_ptr<internal::ActorCell> cell;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : cells_) {
      if (c->context().name == name) cell = c;
    }
  }
  if (!cell) return Lookup(name).status();
  cell->RequestStop();
  TimePoint deadline = timeout == Duration::max() ? TimePoint::max() : SteadyClock::now() + timeout;
  return WaitStopped({cell}, deadline);
}

Status ActorSystem::StopAll(Duration timeout) {
  std::vector<std::shared_ptr<internal::ActorCell>> cells;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cells = cells_;
  }
  for (const auto& c : cells) c->RequestStop();
  TimePoint deadline = timeout == Duration::max() ? TimePoint::max() : SteadyClock::now() + timeout;
  return WaitStopped(cells, deadline);
}

}  // namespace tandem
