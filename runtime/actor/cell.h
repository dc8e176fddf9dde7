// ActorCell (internal): the runtime side of one actor — its mailbox, lifecycle state and
// supervisor. Users see it only through ActorRef / ActorHandle and ActorInfo.
//
// Mailbox: messages are queued under mu_; at most one Drain task per cell is posted to the
// executor at a time (scheduled_), so the actor's methods never run concurrently, and
// messages from one sender run in the order they were enqueued. A Drain runs up to kBatch
// messages, then re-posts itself so actors sharing a pool take turns.
//
// Supervision: a failed message (error or throw), factory or OnStart destroys the instance;
// if restarts remain, the cell pauses for the backoff (TimerQueue), builds a fresh instance
// and runs OnStart again, keeping queued messages. Otherwise it becomes failed: queued and
// later messages are rejected with Unavailable naming the actor and the cause, and the
// failure hook runs.
//
// Thread-safety: public methods are safe from any thread. instance_ is touched only by the
// executor (or by the creating thread before Start()). Promises are resolved outside mu_, so
// continuations may call back into any cell.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeindex>

#include "runtime/actor/actor.h"
#include "runtime/actor/config.h"
#include "runtime/actor/executor.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

using ActorFactory = std::function<Result<std::unique_ptr<Actor>>(const ConfigValue& section,
                                                                  const ActorContext& ctx)>;

namespace internal {

// One queued message; see handle.h for the typed implementation.
class Message {
 public:
  virtual ~Message() = default;
  // Runs on the actor's executor and keeps the result. Returns OK, or the failure the
  // supervisor acts on.
  virtual Status Run(Actor& actor) = 0;
  // Resolves the caller's promise with the result of Run(). Called after the supervisor has
  // updated the actor's state, so a caller that sees an error also sees the restart.
  virtual void Finish() = 0;
  // Resolves the caller's promise with `why` instead of running.
  virtual void Reject(const Status& why) = 0;
};

class ActorCell : public std::enable_shared_from_this<ActorCell> {
 public:
  using FailureHook = std::function<void(const ActorInfo&)>;

  // `executor` and `timers` must outlive every message and timer of this cell (the system
  // stops all cells before it shuts them down).
  ActorCell(ActorContext ctx, ActorOptions opts, std::type_index type, ActorFactory factory,
            ConfigValue section, Executor* executor, TimerQueue* timers, FailureHook hook);
  ~ActorCell();

  // Builds the first instance with the factory (on the executor for GPU actors, else on the
  // calling thread). An error here means the actor never existed.
  Status Create();
  // Posts the first Drain, which runs OnStart. REQUIRES: Create() returned OK.
  void Start();

  // Queues `msg`, or rejects it at once if the actor is failed or stopping.
  void Enqueue(std::unique_ptr<Message> msg);
  // Asks for a graceful stop: queued messages still run, new ones are rejected, then OnStop.
  void RequestStop();
  // Waits until stopped or failed; false if `deadline` passed first.
  bool WaitTerminal(std::optional<TimePoint> deadline);

  ActorInfo Info() const;
  ActorState state() const;
  const ActorContext& context() const { return ctx_; }
  std::type_index type() const { return type_; }

  // Called by Actor.
  void SetStage(std::string stage);
  bool stop_requested() const { return stop_requested_.load(std::memory_order_acquire); }

 private:
  static constexpr int kBatch = 64;

  void Drain();
  Status StartInstance();
  void HandleFailure(const Status& cause);
  void FinishStop();
  void Resume();
  void ScheduleDrainLocked() REQUIRES(mu_);
  // Moves the mailbox out and marks the actor terminal; the caller rejects what it returns.
  std::deque<std::unique_ptr<Message>> TerminateLocked(ActorState final_state) REQUIRES(mu_);
  Status RejectionLocked() const REQUIRES(mu_);
  Duration BackoffFor(int restart) const;

  const ActorContext ctx_;
  const ActorOptions opts_;
  const std::type_index type_;
  const ActorFactory factory_;
  const ConfigValue section_;
  Executor* const executor_;
  TimerQueue* const timers_;
  const FailureHook hook_;

  std::unique_ptr<Actor> instance_;  // executor only
  std::atomic<bool> stop_requested_{false};

  mutable std::mutex mu_;
  std::condition_variable terminal_cv_;
  ActorState state_ GUARDED_BY(mu_) = ActorState::kCreated;
  std::deque<std::unique_ptr<Message>> mailbox_ GUARDED_BY(mu_);
  bool scheduled_ GUARDED_BY(mu_) = false;    // a Drain is posted or running
  bool paused_ GUARDED_BY(mu_) = false;       // waiting out a restart backoff
  bool needs_start_ GUARDED_BY(mu_) = true;   // next Drain must (re)build and start
  int restarts_ GUARDED_BY(mu_) = 0;
  Status last_error_ GUARDED_BY(mu_);
  std::string stage_ GUARDED_BY(mu_);
  uint64_t messages_done_ GUARDED_BY(mu_) = 0;
};

}  // namespace internal
}  // namespace tandem
