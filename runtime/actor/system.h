// ActorSystem: the embedded runtime that spawns, names, supervises and stops actors.
//
//   class Worker : public Actor { public: int Square(int x) { return x * x; } };
//   TANDEM_REGISTER_ACTOR(Worker, "my.worker");          // section: class = "my.worker"
//
//   ActorSystem sys;
//   ASSIGN_OR_RETURN(auto refs, sys.SpawnGroup("worker", section, /*gpus=*/{5, 6, 7}));
//   ASSIGN_OR_RETURN(auto w0, sys.Lookup<Worker>("worker/0"));
//   Future<int> f = w0.call(&Worker::Square, 7);
//   ...
//   RETURN_IF_ERROR(sys.StopAll());    // drain every mailbox, run OnStop
//
// CPU actors share one thread pool; each actor with a GPU gets its own PinnedThread with
// that device current. Names are unique within a system ("group/replica" for groups).
// A failed actor stays listed (state failed, with its cause) until the system is destroyed.
//
// Thread-safety: all methods are safe from any thread, including from inside actors, except
// that StopAll() and the destructor must not be called from an actor of this system (they
// wait for every actor to stop).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/actor/actor.h"
#include "runtime/actor/cell.h"
#include "runtime/actor/config.h"
#include "runtime/actor/executor.h"
#include "runtime/actor/handle.h"
#include "runtime/actor/registry.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

// The keys every [actors.NAME] section takes whatever its class: what SpawnGroup reads
// (class, replicas, max_restarts, restart_backoff_s) and what placement reads (gpus, cpus,
// pinned_bytes). Declared once here; a class's table must not redeclare them.
const KeyTable& ActorGroupKeys();

class ActorSystem {
 public:
  struct Options {
    uint32_t node = 0;      // this node's id in ActorAddress
    int cpu_threads = 0;    // threads of the CPU actor pool; 0: hardware threads (at least 2)
  };
  using FailureHook = std::function<void(const ActorInfo&)>;

  ActorSystem() : ActorSystem(Options{}) {}
  explicit ActorSystem(Options options);
  // Stops every actor (StopAll without a deadline), then joins all threads.
  ~ActorSystem();
  ActorSystem(const ActorSystem&) = delete;
  ActorSystem& operator=(const ActorSystem&) = delete;

  // Builds actor `name` of class `cls` from `section` and starts it (OnStart runs on its
  // executor, asynchronously: heavy set-up belongs there, not in the factory). Returns the
  // factory's error, or InvalidArgument for a taken name.
  Result<ActorRef> Spawn(const ActorClass& cls, std::string name, const ConfigValue& section,
                         ActorOptions options = {});
  // As above, for a class of the global registry ("my.actor").
  Result<ActorRef> Spawn(std::string_view class_name, std::string name,
                         const ConfigValue& section, ActorOptions options = {});
  // As above for C++ class A without going through the registry; the class name is `name`.
  template <typename A>
  Result<ActorHandle<A>> SpawnActor(std::string name, ActorOptions options = {},
                                    const ConfigValue& section = ConfigValue::MakeTable()) {
    ASSIGN_OR_RETURN(ActorRef ref,
                     Spawn(ActorRegistry::ClassOf<A>(name), name, section, options));
    return ref.As<A>();
  }

  // Spawns the replicas "group/0" .. "group/{n-1}" of a job file's actor section. Keys read:
  // those of ActorGroupKeys() (class, replicas, max_restarts, restart_backoff_s), checked
  // there; the class's own keys are the class's business.
  // `gpus`, when not empty, holds the device of each replica (from sched's placement) and
  // must have one entry per replica. All-or-nothing: on an error, the replicas already
  // spawned are stopped and removed.
  Result<std::vector<ActorRef>> SpawnGroup(const std::string& group, const ConfigValue& section,
                                           const std::vector<int>& gpus = {},
                                           bool make_device_current = true);

  // One replica of a group: its index in the whole group and its device (-1: a CPU actor).
  struct ReplicaSlot {
    int replica = 0;
    int gpu = -1;
  };
  // As SpawnGroup, for some replicas only (the ones a placement put on this node): each slot
  // becomes actor "group/REPLICA" with that device, so its ActorContext::replica is its
  // index in the whole group. InvalidArgument for a replica outside [0, replicas) or listed
  // twice. All-or-nothing, like SpawnGroup.
  Result<std::vector<ActorRef>> SpawnReplicas(const std::string& group, const ConfigValue& section,
                                              const std::vector<ReplicaSlot>& slots,
                                              bool make_device_current = true);

  // The actor called `name`, or NotFound listing the known names.
  Result<ActorRef> Lookup(std::string_view name) const;
  template <typename A>
  Result<ActorHandle<A>> Lookup(std::string_view name) const {
    ASSIGN_OR_RETURN(ActorRef ref, Lookup(name));
    return ref.As<A>();
  }

  // Snapshots of all actors, in spawn order.
  std::vector<ActorInfo> Snapshot() const;

  // Runs `hook` (on the failed actor's thread) whenever an actor fails for good, so owners
  // can release what it held. Applies to actors spawned afterwards and before.
  void SetFailureHook(FailureHook hook);

  // Asks actor `name` to stop gracefully and waits up to `timeout`.
  Status Stop(std::string_view name, Duration timeout = std::chrono::seconds(60));
  // Asks every actor to stop (queued messages still run, then OnStop) and waits up to
  // `timeout` for all of them. DeadlineExceeded names the actors still running. Returns OK
  // even if some actors had failed before; their causes are in Snapshot().
  Status StopAll(Duration timeout = std::chrono::seconds(60));

  uint32_t node() const { return options_.node; }

 private:
  Executor* ExecutorFor(const ActorContext& ctx, const ActorOptions& options);
  // Removes a stopped (or never started) actor and joins its pinned thread.
  void Forget(const ActorAddress& address, const std::string& name);
  void OnFailure(const ActorInfo& info);
  static Status WaitStopped(const std::vector<std::shared_ptr<internal::ActorCell>>& cells,
                            TimePoint deadline);

  const Options options_;
  TimerQueue timers_;
  ThreadPool pool_;

  mutable std::mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::vector<std::shared_ptr<internal::ActorCell>> cells_ GUARDED_BY(mu_);
  std::set<std::string, std::less<>> names_ GUARDED_BY(mu_);
  std::map<uint64_t, std::unique_ptr<PinnedThread>> pinned_ GUARDED_BY(mu_);  // by address id
  FailureHook hook_ GUARDED_BY(mu_);
};

}  // namespace tandem
