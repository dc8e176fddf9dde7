// CallAcrossRestarts: one long-running call on an actor that is issued again each time the
// actor's supervisor restarts the actor after that call failed.
//
// A job's actor does its whole part of the job in one call (JobActor::Run). When that call
// fails, the supervisor (cell.h) destroys the instance and, while max_restarts allows,
// builds a fresh one after the backoff (restart_backoff, doubled per restart). A caller
// that wants the work to go on across restarts uses
//
//   CallAcrossRestarts<std::string>(ref,
//       [h] { return h.call(&JobActor::Run, env); },       // issues the call
//       [&](const Status&) { return !env->stopping(); },   // may veto a relaunch
//       [&](Result<std::string> r) { ... });                // the final result, once
//
// After a failed call, the call is issued again when the supervisor restarted the actor
// because of that failure (the actor's restart count went up and it is not failed or
// stopped) and `relaunch` (may be empty) agrees; the new call queues behind the restart and
// runs on the fresh instance. Otherwise `done` gets the result: the first success, the
// failure the supervisor did not restart from (restarts exhausted: the actor is failed, its
// cause in ActorInfo::last_error), a Cancelled result (an actor's answer to a stop), or
// Unavailable for a call a stopping actor refused. A Cancelled result is never relaunched.
//
// Thread-safety: `call`, `relaunch` and `done` run on the thread that resolved the previous
// call (the actor's executor), or on the calling thread when a call resolves at once (a
// refused call); they must be short and must not block. Whatever they capture must outlive
// the call to `done`.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "runtime/actor/future.h"
#include "runtime/actor/handle.h"

namespace tandem {

template <typename T>
void CallAcrossRestarts(ActorRef ref, std::function<Future<T>()> call,
                        std::function<bool(const Status&)> relaunch,
                        std::function<void(Result<T>)> done) {
  struct Loop : std::enable_shared_from_this<Loop> {
    ActorRef ref;
    std::function<Future<T>()> call;
    std::function<bool(const Status&)> relaunch;
    std::function<void(Result<T>)> done;

    void Issue() {
      const int restarts_before = ref.Info().restarts;
      Future<T> f = call();
      f.Then([self = this->shared_from_this(), restarts_before](Result<T> r) {
        self->Settle(std::move(r), restarts_before);
      });
    }
    void Settle(Result<T> r, int restarts_before) {
      if (!r.ok() && r.status().code() != StatusCode::kCancelled) {
        const ActorInfo info = ref.Info();
        if (info.restarts > restarts_before && !IsTerminal(info.state) &&
            (!relaunch || relaunch(r.status()))) {
          Issue();
          return;
        }
      }
      done(std::move(r));
    }
  };
  auto loop = std::make_shared<Loop>();
  loop->ref = std::move(ref);
  loop->call = std::move(call);
  loop->relaunch = std::move(relaunch);
  loop->done = std::move(done);
  loop->Issue();
}

}  // namespace tandem
