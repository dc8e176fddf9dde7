// Executors: where actor mailboxes run.
//
// ThreadPool is shared by all CPU actors; an actor's mailbox never runs on two of its threads
// at once (the ActorCell guarantees that, not the pool). PinnedThread is one dedicated thread
// for one GPU-pinned actor, with its CUDA device made current on that thread before any task
// runs. TimerQueue runs callbacks at a deadline (restart backoff) on its own thread.
//
// Thread-safety: Post/Schedule may be called from any thread. Shutdown() joins the threads;
// tasks posted after it are dropped. Destruction calls Shutdown().
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

class Executor {
 public:
  using Task = std::function<void()>;
  virtual ~Executor() = default;
  // Queues `task`; it runs later on one of the executor's threads.
  virtual void Post(Task task) = 0;
  // Runs the queued tasks, then joins the threads. Idempotent.
  virtual void Shutdown() = 0;
};

// A FIFO queue drained by `threads` threads named "<name>/<i>".
class ThreadPool final : public Executor {
 public:
  ThreadPool(std::string name, int threads);
  ~ThreadPool() override;
  void Post(Task task) override;
  void Shutdown() override;
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// One thread. When `device` >= 0 and `make_device_current` is set, the thread calls
// cudaSetDevice(device) first (in builds with CUDA); init_status() reports the outcome.
// Without CUDA, or with make_device_current=false (fake GPUs in tests), no CUDA call is made.
class PinnedThread final : public Executor {
 public:
  PinnedThread(std::string name, int device, bool make_device_current);
  ~PinnedThread() override;
  void Post(Task task) override;
  void Shutdown() override;
  // OK, or the CudaError from making the device current. Blocks until the thread has tried.
  Status init_status();
  int device() const { return device_; }

 private:
  void Loop(bool make_device_current);

  const int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  bool initialised_ GUARDED_BY(mu_) = false;
  Status init_status_ GUARDED_BY(mu_);
  std::thread thread_;
};

// Runs callbacks at their deadlines on one thread. Callbacks must be short (they usually
// post work to an executor). Pending callbacks are dropped at Shutdown().
class TimerQueue {
 public:
  TimerQueue();
  ~TimerQueue();
  void Schedule(TimePoint deadline, std::function<void()> fn);
  void Shutdown();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<TimePoint, std::function<void()>> timers_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tandem
