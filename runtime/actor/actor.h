// Actor: the base class of everything that runs in a tandem job.
//
// An actor is built by its factory from a config section, started (OnStart), then handles one
// message at a time on its own executor (handle.call(&MyActor::Method, args...)), and is
// stopped (OnStop) when its system stops. Lifecycle:
//
//   created ─► started ─► running ─► stopping ─► stopped
//                  │          │
//                  └──────────┴─► (error) ─► restarting ─► started ...   (up to max_restarts)
//                                          └─► failed                      (then: for good)
//
// `started` means OnStart succeeded and no message has run yet; `running` means at least one
// has. A message that throws or returns a non-OK Status (or Result) is a failure: the caller
// gets that error, and the supervisor replaces the instance by a fresh one from the factory.
//
// Thread-safety: an actor's own members are touched only on its executor (its methods,
// OnStart and OnStop all run there, one at a time); SetStage() and stop_requested() may be
// called from the actor's methods. Everything else about an actor is read through ActorInfo.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem {

class ActorSystem;
namespace internal {
class ActorCell;
}

enum class ActorState : int {
  kCreated,
  kStarted,
  kRunning,
  kStopping,
  kStopped,
  kFailed,
  kRestarting,
};
std::string_view ActorStateName(ActorState state);
// True for stopped and failed: no message will ever run again.
inline bool IsTerminal(ActorState s) { return s == ActorState::kStopped || s == ActorState::kFailed; }

// Where an actor lives: the node (0 = this process for now) and a per-system id. Handles carry
// it so they can later refer to actors on other nodes.
struct ActorAddress {
  uint32_t node = 0;
  uint64_t id = 0;
  bool operator==(const ActorAddress&) const = default;
};

// What a factory and the actor itself know about its place in the job.
struct ActorContext {
  std::string name;        // "drafter/0"
  std::string group;       // "drafter"
  std::string class_name;  // "dflash.drafter"
  int replica = 0;
  int gpu = -1;            // CUDA device index made current on the actor's thread; -1: CPU actor
  int restarts = 0;        // restarts before this instance was built (0: the first one)
  ActorAddress address;
  ActorSystem* system = nullptr;  // to look up peers; outlives the actor
};

// How the system runs and supervises one actor.
struct ActorOptions {
  int gpu = -1;                      // >= 0: dedicated thread with this device current
  bool make_device_current = true;   // false for fake GPUs (tests without a device)
  int max_restarts = 0;              // restarts allowed before the actor is failed for good
  Duration restart_backoff = std::chrono::milliseconds(100);  // doubled per restart...
  Duration max_restart_backoff = std::chrono::seconds(5);     // ...up to this
};

// A consistent snapshot of one actor, for status reporting.
struct ActorInfo {
  std::string name;
  std::string class_name;
  ActorAddress address;
  ActorState state = ActorState::kCreated;
  int gpu = -1;
  int restarts = 0;
  int max_restarts = 0;
  Duration restart_backoff{};  // delay before the first restart (ActorOptions)
  Status last_error;       // the failure that caused the last restart or the final failure
  std::string stage;       // set by the actor with SetStage()
  size_t mailbox_depth = 0;
  uint64_t messages_done = 0;
};

class Actor {
 public:
  virtual ~Actor() = default;

  // Runs on the actor's executor before its first message. A non-OK Status (or a throw)
  // counts as a failure of the actor.
  virtual Status OnStart() { return Status::Ok(); }
  // Runs on the actor's executor after the mailbox is drained at a graceful stop. Not called
  // for an instance that failed. An error is recorded and logged; the actor still stops.
  virtual Status OnStop() { return Status::Ok(); }

  // Set before OnStart; factories get the same context as an argument.
  const ActorContext& context() const { return ctx_; }
  const std::string& name() const { return ctx_.name; }

 protected:
  // Records what the actor is doing ("forward", "waiting for input"), shown by status.
  void SetStage(std::string stage);
  // True once the system asked this actor to stop. Long-running methods (a producer loop)
  // should poll it and return so the stop can drain the mailbox.
  bool stop_requested() const;

 private:
  friend class internal::ActorCell;
  ActorContext ctx_;
  internal::ActorCell* cell_ = nullptr;
};

}  // namespace tandem
