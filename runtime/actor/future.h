// Future<T> / Promise<T>: a one-shot value-or-Status handed from an actor to its caller.
//
//   Promise<int> p;
//   Future<int> f = p.GetFuture();
//   p.Set(42);                          // or p.Set(UnavailableError("..."))
//   Result<int> r = f.Get();            // blocks until set
//
// A Future is single-consumer, like std::future: Get() and a successful GetFor() move the
// result out and leave the future invalid; Then() consumes it too. Use Future<Unit> where
// there is no value (methods returning void or Status).
//
// Then(fn) runs fn(Result<T>) on the thread that sets the promise (an actor's executor), or
// at once on the caller's thread if the result is already there; fn must be short and must
// not block. It returns a Future of what fn returns (U, Result<U>, Status -> Unit, void ->
// Unit). An exception thrown by fn becomes an Internal error in that future.
//
// A Promise destroyed without a value resolves its future to Cancelled, so no caller waits
// forever. Thread-safety: Promise and Future may live on different threads; each object
// itself is used by one thread at a time.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

// The value of a Future that carries no value.
struct Unit {
  bool operator==(const Unit&) const { return true; }
};

template <typename T>
class Future;
template <typename T>
class Promise;

namespace internal {

template <typename T>
class FutureState {
 public:
  void Set(Result<T> r) {
    std::function<void(Result<T>)> cont;
    {
      std::lock_guard<std::mutex> lock(mu_);
      TANDEM_CHECK_MSG(!has_result_, "promise set twice");
      has_result_ = true;
      if (continuation_) {
        cont = std::move(continuation_);
      } else {
        result_.emplace(std::move(r));
      }
      cv_.notify_all();
    }
    if (cont) cont(std::move(r));
  }

  bool ready() const {
    std::lock_guard<std::mutex> lock(mu_);
    return result_.has_value();
  }

  // Waits until a result is there or `deadline` passes; returns it (moved out) or nullopt.
  std::optional<Result<T>> Take(std::optional<TimePoint> deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    auto has = [this] { return result_.has_value(); };
    if (deadline) {
      if (!cv_.wait_until(lock, *deadline, has)) return std::nullopt;
    } else {
      cv_.wait(lock, has);
    }
    std::optional<Result<T>> out = std::move(result_);
    result_.reset();
    return out;
  }

  // Runs `fn` with the result now if it is there, else when it is set.
  void OnReady(std::function<void(Result<T>)> fn) {
    std::optional<Result<T>> now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      TANDEM_CHECK_MSG(!continuation_, "Then() called twice on one future");
      if (result_.has_value()) {
        now = std::move(result_);
        result_.reset();
      } else {
        continuation_ = std::move(fn);
        return;
      }
    }
    fn(std::move(*now));
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool has_result_ GUARDED_BY(mu_) = false;
  std::optional<Result<T>> result_ GUARDED_BY(mu_);
  std::function<void(Result<T>)> continuation_ GUARDED_BY(mu_);
};

// What a callable's return type R becomes inside a Future: void/Status -> Unit,
// Result<U> -> U, anything else -> itself.
template <typename R>
struct FutureValue {
  using type = R;
};
template <>
struct FutureValue<void> {
  using type = Unit;
};
template <>
struct FutureValue<Status> {
  using type = Unit;
};
template <typename U>
struct FutureValue<Result<U>> {
  using type = U;
};
template <typename R>
using FutureValueT = typename FutureValue<R>::type;

// Calls fn(args...) and converts what it returns (or throws) into Result<FutureValueT<R>>.
template <typename F, typename... Args>
auto InvokeToResult(F&& fn, Args&&... args)
    -> Result<FutureValueT<std::invoke_result_t<F, Args...>>> {
  using R = std::invoke_result_t<F, Args...>;
  try {
    if constexpr (std::is_void_v<R>) {
      std::invoke(std::forward<F>(fn), std::forward<Args>(args)...);
      return Unit{};
    } else if constexpr (std::is_same_v<R, Status>) {
      Status s = std::invoke(std::forward<F>(fn), std::forward<Args>(args)...);
      if (!s.ok()) return s;
      return Unit{};
    } else {
      return std::invoke(std::forward<F>(fn), std::forward<Args>(args)...);
    }
  } catch (const std::exception& e) {
    return InternalError("threw {}", e.what());
  } catch (...) {
    return InternalError("threw a non-std exception");
  }
}

}  // namespace internal

template <typename T>
class Promise {
 public:
  Promise() : state_(std::make_shared<internal::FutureState<T>>()) {}
  Promise(Promise&&) noexcept = default;
  Promise& operator=(Promise&& o) noexcept {
    if (this != &o) {
      Abandon();
      state_ = std::move(o.state_);
      future_taken_ = o.future_taken_;
    }
    return *this;
  }
  Promise(const Promise&) = delete;
  Promise& operator=(const Promise&) = delete;
  ~Promise() { Abandon(); }

  // REQUIRES: called at most once.
  Future<T> GetFuture() {
    TANDEM_CHECK_MSG(!future_taken_, "GetFuture() called twice");
    future_taken_ = true;
    return Future<T>(state_);
  }

  // Resolves the future. REQUIRES: not set before; a Status must not be OK.
  void Set(Result<T> r) {
    TANDEM_CHECK_MSG(state_ != nullptr, "promise already set");
    std::shared_ptr<internal::FutureState<T>> s = std::move(state_);
    s->Set(std::move(r));
  }

 private:
  void Abandon() {
    if (state_) Set(CancelledError("promise dropped without a value"));
  }

  std::shared_ptr<internal::FutureState<T>> state_;
  bool future_taken_ = false;
};

template <typename T>
class Future {
 public:
  Future() = default;

  // An already-resolved future.
  static Future Ready(Result<T> r) {
    Promise<T> p;
    Future f = p.GetFuture();
    p.Set(std::move(r));
    return f;
  }

  // False for a default-built future or one whose result was taken.
  bool valid() const { return state_ != nullptr; }
  // True when the result is there (Get() will not block). REQUIRES: valid().
  bool ready() const { return Checked().ready(); }

  // Blocks until resolved; moves the result out. REQUIRES: valid().
  Result<T> Get() {
    auto r = Checked().Take(std::nullopt);
    state_.reset();
    return std::move(*r);
  }

  // As Get(), but returns DeadlineExceeded if nothing arrives within `timeout`; the future
  // then stays valid and may be waited on again. REQUIRES: valid().
  template <typename Rep, typename Period>
  Result<T> GetFor(std::chrono::duration<Rep, Period> timeout) {
    auto r = Checked().Take(SteadyClock::now() +
                            std::chrono::duration_cast<SteadyClock::duration>(timeout));
    if (!r) {
      return DeadlineExceededError(
          "no result after {} ms",
          std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
    }
    state_.reset();
    return std::move(*r);
  }

  // Chains fn(Result<T>) (see the header comment). Consumes this future.
  template <typename F>
  auto Then(F fn) -> Future<internal::FutureValueT<std::invoke_result_t<F, Result<T>>>> {
    using U = internal::FutureValueT<std::invoke_result_t<F, Result<T>>>;
    Promise<U> next;
    Future<U> out = next.GetFuture();
    auto state = std::move(state_);
    TANDEM_CHECK_MSG(state != nullptr, "Then() on an invalid future");
    state->OnReady([fn = std::move(fn), next = std::make_shared<Promise<U>>(std::move(next))](
                       Result<T> r) mutable {
      next->Set(internal::InvokeToResult(fn, std::move(r)));
    });
    return out;
  }

 private:
  friend class Promise<T>;
  explicit Future(std::shared_ptr<internal::FutureState<T>> s) : state_(std::move(s)) {}
  internal::FutureState<T>& Checked() const {
    TANDEM_CHECK_MSG(state_ != nullptr, "use of an invalid future");
    return *state_;
  }

  std::shared_ptr<internal::FutureState<T>> state_;
};

}  // namespace tandem
