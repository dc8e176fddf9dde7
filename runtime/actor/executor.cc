#include "runtime/actor/executor.h"

#include <utility>

#include "runtime/core/logging.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem {

ThreadPool::ThreadPool(std::string name, int threads) {
  TANDEM_CHECK_MSG(threads > 0, "ThreadPool '{}' needs at least one thread, got {}", name,
                   threads);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, prefix = fmt::format("{}/{}", name, i)] {
      log::SetThreadPrefix(prefix);
      Loop();
    });
  }
}

ThreadPool::~ThreadPool() { Shutdown(); }

void ThreadPool::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::Loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return shutdown_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // shut down and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

PinnedThread::PinnedThread(std::string name, int device, bool make_device_current)
    : device_(device) {
  thread_ = std::thread([this, name = std::move(name), make_device_current] {
    log::SetThreadPrefix(name);
    Loop(make_device_current);
  });
}

PinnedThread::~PinnedThread() { Shutdown(); }

void PinnedThread::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

Status PinnedThread::init_status() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return initialised_; });
  return init_status_;
}

void PinnedThread::Loop(bool make_device_current) {
  Status init;
#ifdef TANDEM_HAVE_CUDA
  if (device_ >= 0 && make_device_current) {
    cudaError_t err = cudaSetDevice(device_);
    if (err != cudaSuccess) {
      init = CudaError("cudaSetDevice({}) on the actor's pinned thread: {}", device_,
                       cudaGetErrorString(err));
    }
  }
#endif
  {
    std::lock_guard<std::mutex> lock(mu_);
    init_status_ = init;
    initialised_ = true;
  }
  cv_.notify_all();
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return shutdown_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void PinnedThread::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

TimerQueue::TimerQueue() : thread_([this] { Loop(); }) {}

TimerQueue::~TimerQueue() { Shutdown(); }

void TimerQueue::Schedule(TimePoint deadline, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    timers_.emplace(deadline, std::move(fn));
  }
  cv_.notify_one();
}

void TimerQueue::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutdown_) {
    if (timers_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto first = timers_.begin();
    if (SteadyClock::now() < first->first) {
      cv_.wait_until(lock, first->first);
      continue;
    }
    std::function<void()> fn = std::move(first->second);
    timers_.erase(first);
    lock.unlock();
    fn();
    lock.lock();
  }
}

void TimerQueue::Shutdown() {
  std::multimap<TimePoint, std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    dropped.swap(timers_);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tandem
