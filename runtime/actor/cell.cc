#include "runtime/actor/cell.h"

#include <algorithm>
#include <utility>

#include "runtime/actor/future.h"
#include "runtime/core/logging.h"

namespace tandem::internal {
namespace {

// Sets the log prefix of the current thread for the lifetime of the object.
class ScopedLogPrefix {
 public:
  explicit ScopedLogPrefix(const std::string& prefix) : saved_(log::ThreadPrefix()) {
    log::SetThreadPrefix(prefix);
  }
  ~ScopedLogPrefix() { log::SetThreadPrefix(std::move(saved_)); }

 private:
  std::string saved_;
};

void RejectAll(std::deque<std::unique_ptr<Message>>& msgs, const Status& why) {
  for (auto& m : msgs) m->Reject(why);
  msgs.clear();
}

}  // namespace

ActorCell::ActorCell(ActorContext ctx, ActorOptions opts, std::type_index type,
                     ActorFactory factory, ConfigValue section, Executor* executor,
                     TimerQueue* timers, FailureHook hook)
    : ctx_(std::move(ctx)),
      opts_(opts),
      type_(type),
      factory_(std::move(factory)),
      section_(std::move(section)),
      executor_(executor),
      timers_(timers),
      hook_(std::move(hook)) {}

ActorCell::~ActorCell() = default;

Status ActorCell::Create() {
  auto build = [this]() -> Status {
    Result<std::unique_ptr<Actor>> made =
        InvokeToResult([this] { return factory_(section_, ctx_); });
    if (!made.ok()) {
      return made.status().WithContext(
          fmt::format("cannot build actor '{}' of class '{}'", ctx_.name, ctx_.class_name));
    }
    instance_ = std::move(made).value();
    return Status::Ok();
  };
  if (ctx_.gpu < 0) return build();
  // GPU actors are built on their pinned thread, with their device current.
  Promise<Unit> done;
  Future<Unit> f = done.GetFuture();
  executor_->Post([&build, p = std::make_shared<Promise<Unit>>(std::move(done))] {
    p->Set(InvokeToResult(build));
  });
  return f.Get().status();
}

void ActorCell::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  ScheduleDrainLocked();
}

void ActorCell::ScheduleDrainLocked() {
  if (scheduled_ || paused_ || IsTerminal(state_)) return;
  scheduled_ = true;
  executor_->Post([self = shared_from_this()] { self->Drain(); });
}

Status ActorCell::RejectionLocked() const {
  if (state_ == ActorState::kFailed) {
    return UnavailableError("actor '{}' failed: {}", ctx_.name, last_error_.ToString());
  }
  return UnavailableError("actor '{}' is {} and takes no more messages", ctx_.name,
                          state_ == ActorState::kStopped ? "stopped" : "stopping");
}

void ActorCell::Enqueue(std::unique_ptr<Message> msg) {
  Status rejected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (IsTerminal(state_) || stop_requested_.load(std::memory_order_relaxed)) {
      rejected = RejectionLocked();
    } else {
      mailbox_.push_back(std::move(msg));
      ScheduleDrainLocked();
      return;
    }
  }
  msg->Reject(rejected);
}

void ActorCell::RequestStop() {
  std::deque<std::unique_ptr<Message>> rejected;
  Status why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (IsTerminal(state_)) return;
    stop_requested_.store(true, std::memory_order_release);
    if (paused_) {
      // Waiting out a restart backoff: there is no instance to drain into or to stop.
      rejected = TerminateLocked(ActorState::kStopped);
      why = RejectionLocked();
    } else {
      if (state_ == ActorState::kStarted || state_ == ActorState::kRunning) {
        state_ = ActorState::kStopping;
      }
      ScheduleDrainLocked();
    }
  }
  RejectAll(rejected, why);
}

std::deque<std::unique_ptr<Message>> ActorCell::TerminateLocked(ActorState final_state) {
  state_ = final_state;
  scheduled_ = false;
  paused_ = false;
  terminal_cv_.notify_all();
  std::deque<std::unique_ptr<Message>> out;
  out.swap(mailbox_);
  return out;
}

bool ActorCell::WaitTerminal(std::optional<TimePoint> deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [this] { return IsTerminal(state_); };
  if (!deadline) {
    terminal_cv_.wait(lock, done);
    return true;
  }
  return terminal_cv_.wait_until(lock, *deadline, done);
}

void ActorCell::Drain() {
  ScopedLogPrefix prefix(ctx_.name);
  enum class Next { kStart, kRun, kStop, kYield, kDone };
  for (int n = 0;; ++n) {
    std::unique_ptr<Message> msg;
    std::deque<std::unique_ptr<Message>> rejected;
    Status why;
    Next next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const bool stopping = stop_requested_.load(std::memory_order_relaxed);
      if (IsTerminal(state_)) {
        next = Next::kDone;
      } else if (needs_start_ && stopping && state_ == ActorState::kRestarting) {
        // Stopped between a failure and its restart: nothing to drain into or to stop.
        rejected = TerminateLocked(ActorState::kStopped);
        why = RejectionLocked();
        next = Next::kDone;
      } else if (needs_start_) {
        next = Next::kStart;
      } else if (mailbox_.empty()) {
        if (stopping) {
          state_ = ActorState::kStopping;
          next = Next::kStop;
        } else {
          scheduled_ = false;
          next = Next::kDone;
        }
      } else if (n >= kBatch) {
        next = Next::kYield;  // stays scheduled_
      } else {
        msg = std::move(mailbox_.front());
        mailbox_.pop_front();
        next = Next::kRun;
      }
    }
    switch (next) {
      case Next::kDone:
        RejectAll(rejected, why);
        return;
      case Next::kYield:
        executor_->Post([self = shared_from_this()] { self->Drain(); });
        return;
      case Next::kStop:
        FinishStop();
        return;
      case Next::kStart: {
        Status st = StartInstance();
        if (!st.ok()) {
          HandleFailure(st);
          return;
        }
        break;
      }
      case Next::kRun: {
        Status st = msg->Run(*instance_);
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++messages_done_;
          if (state_ == ActorState::kStarted) state_ = ActorState::kRunning;
        }
        // Cancelled is an actor's answer to a stop request (its own, or its job's), not a
        // failure: the caller gets it through the future; no restart, no failed state.
        if (!st.ok() && st.code() != StatusCode::kCancelled) {
          HandleFailure(st);
          msg->Finish();
          return;
        }
        msg->Finish();
        break;
      }
    }
  }
}

Status ActorCell::StartInstance() {
  ActorContext ctx = ctx_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ctx.restarts = restarts_;  // what a rebuilt instance's factory and context() see
  }
  if (!instance_) {
    Result<std::unique_ptr<Actor>> made =
        InvokeToResult([&] { return factory_(section_, ctx); });
    if (!made.ok()) return made.status().WithContext("factory");
    instance_ = std::move(made).value();
  }
  instance_->ctx_ = std::move(ctx);
  instance_->cell_ = this;
  Result<Unit> started = InvokeToResult([this] { return instance_->OnStart(); });
  if (!started.ok()) return started.status().WithContext("OnStart");
  std::lock_guard<std::mutex> lock(mu_);
  needs_start_ = false;
  state_ = stop_requested_.load(std::memory_order_relaxed) ? ActorState::kStopping
                                                           : ActorState::kStarted;
  return Status::Ok();
}

Duration ActorCell::BackoffFor(int restart) const {
  Duration d = opts_.restart_backoff;
  for (int i = 1; i < restart && d < opts_.max_restart_backoff; ++i) d *= 2;
  return std::min(d, opts_.max_restart_backoff);
}

void ActorCell::HandleFailure(const Status& cause) {
  instance_.reset();  // the failed instance is destroyed on its own thread
  std::deque<std::unique_ptr<Message>> rejected;
  Status why;
  Duration delay{};
  int restart = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = cause;
    needs_start_ = true;
    if (!stop_requested_.load(std::memory_order_relaxed) && restarts_ < opts_.max_restarts) {
      restart = ++restarts_;
      state_ = ActorState::kRestarting;
      paused_ = true;
      scheduled_ = false;
      delay = BackoffFor(restart);
    } else {
      rejected = TerminateLocked(ActorState::kFailed);
      why = RejectionLocked();
    }
  }
  if (restart > 0) {
    TLOG_WARN("failed ({}); restart {}/{} in {} ms", cause.ToString(), restart,
              opts_.max_restarts,
              std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
    timers_->Schedule(SteadyClock::now() + delay, [self = shared_from_this()] { self->Resume(); });
    return;
  }
  TLOG_ERROR("failed for good after {} restarts: {}", opts_.max_restarts, cause.ToString());
  RejectAll(rejected, why);
  if (hook_) hook_(Info());
}

void ActorCell::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != ActorState::kRestarting || !paused_) return;
  paused_ = false;
  ScheduleDrainLocked();
}

void ActorCell::FinishStop() {
  Result<Unit> stopped = InvokeToResult([this] { return instance_->OnStop(); });
  if (!stopped.ok()) TLOG_WARN("OnStop failed: {}", stopped.status().ToString());
  instance_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  if (!stopped.ok()) last_error_ = stopped.status().WithContext("OnStop");
  std::deque<std::unique_ptr<Message>> none = TerminateLocked(ActorState::kStopped);
  TANDEM_CHECK_MSG(none.empty(), "messages queued after the stop request of '{}'", ctx_.name);
}

ActorInfo ActorCell::Info() const {
  std::lock_guard<std::mutex> lock(mu_);
  ActorInfo info;
  info.name = ctx_.name;
  info.class_name = ctx_.class_name;
  info.address = ctx_.address;
  info.state = state_;
  info.gpu = ctx_.gpu;
  info.restarts = restarts_;
  info.max_restarts = opts_.max_restarts;
  info.restart_backoff = opts_.restart_backoff;
  info.last_error = last_error_;
  info.stage = stage_;
  info.mailbox_depth = mailbox_.size();
  info.messages_done = messages_done_;
  return info;
}

ActorState ActorCell::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void ActorCell::SetStage(std::string stage) {
  std::lock_guard<std::mutex> lock(mu_);
  stage_ = std::move(stage);
}

}  // namespace tandem::internal
