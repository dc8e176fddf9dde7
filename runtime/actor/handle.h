// ActorRef and ActorHandle<A>: how callers reach an actor.
//
//   ActorHandle<Counter> h = ...;                      // from ActorSystem
//   Future<int64_t> f = h.call(&Counter::Add, 5);      // runs Counter::Add(5) on the actor
//   h.tell(&Counter::Reset);                           // fire and forget
//
// A method may return R, void, Status or Result<R>; call() returns Future<R> (Future<Unit>
// for void and Status). Arguments are copied or moved into the message, then moved into
// the method. A method that throws or returns an error resolves the future to that error
// (named after the actor) and fails the actor (see actor.h for restarts); nothing thrown
// inside an actor ever reaches the caller as an exception. Calls to a failed or stopped
// actor resolve to Unavailable.
//
// A handle carries the actor's ActorAddress (node, id). Only actors of this process can be
// called for now; a handle without a local actor resolves calls to Unavailable.
//
// Thread-safety: handles are cheap to copy and safe to use from any thread, including from
// inside other actors. Inside an actor, prefer Then() to a blocking Get(): a CPU actor that
// blocks holds one thread of the shared pool.
#pragma once

#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>

#include "runtime/actor/actor.h"
#include "runtime/actor/cell.h"
#include "runtime/actor/future.h"

namespace tandem {

template <typename A>
class ActorHandle;

namespace internal {

template <typename A, typename Method, typename T, typename... Args>
class CallMessage final : public Message {
 public:
  CallMessage(Method method, Promise<T> promise, Args... args)
      : method_(method), promise_(std::move(promise)), args_(std::move(args)...) {}

  Status Run(Actor& actor) override {
    A& self = static_cast<A&>(actor);
    result_.emplace(std::apply(
        [&](Args&... a) { return InvokeToResult(method_, self, std::move(a)...); }, args_));
    if (result_->ok()) return Status::Ok();
    Status failure = result_->status().WithContext(fmt::format("actor '{}'", actor.name()));
    result_.emplace(failure);
    return failure;
  }
  void Finish() override { promise_.Set(std::move(*result_)); }
  void Reject(const Status& why) override { promise_.Set(why); }

 private:
  Method method_;
  Promise<T> promise_;
  std::tuple<Args...> args_;
  std::optional<Result<T>> result_;
};

}  // namespace internal

// An untyped reference to an actor: its name, address and status.
class ActorRef {
 public:
  ActorRef() = default;
  explicit ActorRef(std::shared_ptr<internal::ActorCell> cell)
      : cell_(std::move(cell)), address_(cell_->context().address) {}

  // True when the ref points at an actor of this process.
  bool local() const { return cell_ != nullptr; }
  const ActorAddress& address() const { return address_; }
  // "" for a ref without a local actor.
  std::string name() const { return cell_ ? cell_->context().name : std::string(); }
  // A snapshot of the actor's state. REQUIRES: local().
  ActorInfo Info() const { return cell_->Info(); }

  // A typed handle, or InvalidArgument when the actor is not exactly of class A.
  template <typename A>
  Result<ActorHandle<A>> As() const {
    if (!cell_) return UnavailableError("actor at node {} id {} is not local", address_.node,
                                        address_.id);
    if (cell_->type() != std::type_index(typeid(A))) {
      return InvalidArgumentError("actor '{}' is of class '{}', not the requested C++ type {}",
                                  name(), cell_->context().class_name, typeid(A).name());
    }
    return ActorHandle<A>(cell_);
  }

  // A handle typed by a base class A of the actor's class (e.g. a JobActor interface). The
  // type is checked on every call (a call on an actor that is not an A resolves to
  // InvalidArgument), since a restart may build a new instance.
  template <typename A>
  Result<ActorHandle<A>> AsBase() const {
    if (!cell_) return UnavailableError("actor at node {} id {} is not local", address_.node,
                                        address_.id);
    return ActorHandle<A>(cell_);
  }

 protected:
  std::shared_ptr<internal::ActorCell> cell_;
  ActorAddress address_;
};

template <typename A>
class ActorHandle : public ActorRef {
 public:
  ActorHandle() = default;

  // Queues a call of `method` with `args` and returns its future (see the header comment).
  template <typename M, typename... Args>
  auto call(M A::*method, Args&&... args) const {
    using R = std::invoke_result_t<M A::*, A&, std::decay_t<Args>&&...>;
    using T = internal::FutureValueT<R>;
    Promise<T> promise;
    Future<T> future = promise.GetFuture();
    Send<M, T>(method, std::move(promise), std::forward<Args>(args)...);
    return future;
  }

  // As call(), without a future; a failure still reaches the log and the supervisor.
  template <typename M, typename... Args>
  void tell(M A::*method, Args&&... args) const {
    using R = std::invoke_result_t<M A::*, A&, std::decay_t<Args>&&...>;
    Send<M, internal::FutureValueT<R>>(method, {}, std::forward<Args>(args)...);
  }

 private:
  friend class ActorRef;
  explicit ActorHandle(std::shared_ptr<internal::ActorCell> cell) : ActorRef(std::move(cell)) {}

  template <typename M, typename T, typename... Args>
  void Send(M A::*method, Promise<T> promise, Args&&... args) const {
    if (!cell_) {
      promise.Set(UnavailableError("actor at node {} id {} is not reachable from this process",
                                   address_.node, address_.id));
      return;
    }
    cell_->Enqueue(
        std::make_unique<internal::CallMessage<A, M A::*, T, std::decay_t<Args>...>>(
            method, std::move(promise), std::forward<Args>(args)...));
  }
};

}  // namespace tandem
