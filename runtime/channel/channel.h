// Channel<T>: a bounded multi-producer multi-consumer queue between actors.
//
//   ASSIGN_OR_RETURN(auto ch, Channel<Batch>::Create("hidden", {.capacity = 60, .min_ready = 1}));
//   RETURN_IF_ERROR(ch->Push(std::move(batch)));          // waits while full
//   ASSIGN_OR_RETURN(Batch b, ch->Pop());                 // waits for min_ready items
//   ASSIGN_OR_RETURN(auto v, ch->PopBatch(1, 8, 50ms));   // 1..8 items within 50 ms
//
// Contracts:
// * Push waits while the channel is full. On any error the pushed item is left untouched in
//   the caller's variable (the rvalue is only moved from on success).
// * A consumer takes nothing until at least min_ready items are queued, or the channel is
//   closed (then it drains what is left regardless of min_ready).
// * After Close(): pushes fail with Unavailable; pops succeed until the channel is empty,
//   then fail with Unavailable. Blocked threads wake at once.
// * Timed calls fail with DeadlineExceeded when the timeout passes first.
// * ChannelHolderHooks<T>::OnEnter runs when an item enters the channel and OnLeave when it
//   leaves (popped, or destroyed with the channel). A specialisation lets a channel of
//   ObjectRefs count its refs as channel holdings (see ref_channel.h). Hooks run under the
//   channel's lock: they must be cheap and must not call back into the channel.
//
// Thread-safety: all methods are safe from any thread. Items live in a ring preallocated at
// Create(), so push and pop do not allocate (PopBatch allocates its result vector).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "runtime/channel/channel_base.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

// Customisation point: specialise for item types whose holders must be told where they are.
template <class T>
struct ChannelHolderHooks {
  static void OnEnter(T&) {}
  static void OnLeave(T&) {}
};

// A timeout meaning "wait as long as it takes".
inline constexpr Duration kWaitForever = Duration::max();

template <class T>
class Channel final : public ChannelBase {
 public:
  // InvalidArgument if the options are invalid (see ChannelOptions). `clock` measures the
  // waits reported in Stats() (a test passes a ManualClock); deadlines of timed calls are on
  // the steady clock. REQUIRES: `clock` outlives the channel.
  static Result<std::shared_ptr<Channel<T>>> Create(std::string name, ChannelOptions options,
                                                    const Clock& clock = RealClock()) {
    RETURN_IF_ERROR(ValidateChannelOptions(name, options));
    return std::shared_ptr<Channel<T>>(new Channel<T>(std::move(name), options, clock));
  }

  ~Channel() override {
    std::lock_guard lock(mu_);
    while (size_ > 0) TakeFrontLocked();
  }

  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  const std::string& name() const override { return name_; }
  const std::type_info& item_type() const override { return typeid(T); }
  const ChannelOptions& options() const { return options_; }

  Status Push(T&& item) { return PushFor(std::move(item), kWaitForever); }
  // Fails with DeadlineExceeded at once if the channel is full.
  Status TryPush(T&& item) { return PushFor(std::move(item), Duration::zero()); }
  Status PushFor(T&& item, Duration timeout) {
    std::unique_lock lock(mu_);
    RETURN_IF_ERROR(WaitLocked(lock, timeout, /*producer=*/true, [&] {
      return closed_ || size_ < options_.capacity;
    }));
    if (closed_) return UnavailableError("channel '{}' is closed; push refused", name_);
    std::optional<T>& slot = ring_[(head_ + size_) % ring_.size()];
    slot.emplace(std::move(item));
    ChannelHolderHooks<T>::OnEnter(*slot);
    ++size_;
    ++total_pushed_;
    max_depth_ = std::max(max_depth_, size_);
    lock.unlock();
    ready_.notify_all();  // consumers may wait for different thresholds
    return Status::Ok();
  }

  // One item, waiting for min_ready items (or close).
  Result<T> Pop() { return PopFor(kWaitForever); }
  Result<T> TryPop() { return PopFor(Duration::zero()); }
  Result<T> PopFor(Duration timeout) {
    std::unique_lock lock(mu_);
    RETURN_IF_ERROR(WaitForItemsLocked(lock, ReadyThreshold(), timeout));
    T item = TakeFrontLocked();
    lock.unlock();
    not_full_.notify_one();
    return item;
  }

  // Between 1 and `max` items, once at least `min_ready` (0 behaves as 1) are queued or the
  // channel is closed. REQUIRES: 1 <= max, min_ready <= capacity.
  Result<std::vector<T>> PopBatch(size_t min_ready, size_t max, Duration timeout) {
    TANDEM_CHECK_MSG(max >= 1 && min_ready <= options_.capacity,
                     "channel '{}': PopBatch(min_ready={}, max={}) with capacity {}", name_,
                     min_ready, max, options_.capacity);
    std::unique_lock lock(mu_);
    RETURN_IF_ERROR(WaitForItemsLocked(lock, std::max<size_t>(min_ready, 1), timeout));
    std::vector<T> items;
    const size_t n = std::min(max, size_);
    items.reserve(n);
    for (size_t i = 0; i < n; ++i) items.push_back(TakeFrontLocked());
    lock.unlock();
    not_full_.notify_all();
    return items;
  }
  // As above with the channel's own min_ready.
  Result<std::vector<T>> PopBatch(size_t max, Duration timeout) {
    return PopBatch(ReadyThreshold(), max, timeout);
  }

  void Close() override {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    not_full_.notify_all();
    ready_.notify_all();
  }

  ChannelStats Stats() const override {
    std::lock_guard lock(mu_);
    ChannelStats s;
    s.name = name_;
    s.item_type = DemangledTypeName(typeid(T));
    s.capacity = options_.capacity;
    s.min_ready = options_.min_ready;
    s.depth = size_;
    s.max_depth = max_depth_;
    s.closed = closed_;
    s.total_pushed = total_pushed_;
    s.total_popped = total_popped_;
    s.push_waits = push_.waits;
    s.pop_waits = pop_.waits;
    s.push_wait_total_ns = push_.total_ns;
    s.pop_wait_total_ns = pop_.total_ns;
    s.recent_push_wait_ns = push_.recent_ns;
    s.recent_pop_wait_ns = pop_.recent_ns;
    s.blocked_producers = push_.blocked;
    s.blocked_consumers = pop_.blocked;
    return s;
  }

 private:
  // Wait bookkeeping for one side (producers or consumers).
  struct WaitStats {
    uint64_t waits = 0;
    int64_t total_ns = 0;
    double recent_ns = 0;
    int blocked = 0;
    void AddCall(int64_t wait_ns) { recent_ns += (static_cast<double>(wait_ns) - recent_ns) / 8; }
  };

  Channel(std::string name, ChannelOptions options, const Clock& clock)
      : name_(std::move(name)), options_(options), clock_(clock), ring_(options.capacity) {}

  size_t ReadyThreshold() const { return std::max<size_t>(options_.min_ready, 1); }

  Status WaitForItemsLocked(std::unique_lock<std::mutex>& lock, size_t threshold,
                            Duration timeout) REQUIRES(mu_) {
    RETURN_IF_ERROR(WaitLocked(lock, timeout, /*producer=*/false,
                               [&] { return closed_ || size_ >= threshold; }));
    if (size_ == 0) return UnavailableError("channel '{}' is closed and drained", name_);
    return Status::Ok();
  }

  // Waits until `ready()` holds or the timeout passes; records the wait on its side.
  template <class Pred>
  Status WaitLocked(std::unique_lock<std::mutex>& lock, Duration timeout, bool producer,
                    Pred ready) REQUIRES(mu_) {
    WaitStats& side = producer ? push_ : pop_;
    if (ready()) {
      side.AddCall(0);
      return Status::Ok();
    }
    if (timeout <= Duration::zero()) {
      side.AddCall(0);
      return DeadlineExceededError("channel '{}': {} would block ({} of {} queued, min_ready {})",
                                   name_, producer ? "push" : "pop", size_, options_.capacity,
                                   options_.min_ready);
    }
    std::condition_variable& cv = producer ? not_full_ : ready_;
    const TimePoint start = clock_.Now();
    const TimePoint real_start = SteadyClock::now();
    ++side.blocked;
    bool met = true;
    if (timeout > TimePoint::max() - real_start) {  // kWaitForever, or past the clock's end
      cv.wait(lock, ready);
    } else {
      met = cv.wait_until(lock, real_start + timeout, ready);
    }
    --side.blocked;
    const int64_t waited = (clock_.Now() - start).count();
    ++side.waits;
    side.total_ns += waited;
    side.AddCall(waited);
    if (!met) {
      return DeadlineExceededError(
          "channel '{}': {} timed out after {:.3f} ms ({} of {} queued, min_ready {})", name_,
          producer ? "push" : "pop", waited * 1e-6, size_, options_.capacity, options_.min_ready);
    }
    return Status::Ok();
  }

  T TakeFrontLocked() REQUIRES(mu_) {
    std::optional<T>& slot = ring_[head_];
    ChannelHolderHooks<T>::OnLeave(*slot);
    T item = std::move(*slot);
    slot.reset();
    head_ = (head_ + 1) % ring_.size();
    --size_;
    ++total_popped_;
    return item;
  }

  const std::string name_;
  const ChannelOptions options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;  // producers wait here
  std::condition_variable ready_;     // consumers wait here
  std::vector<std::optional<T>> ring_ GUARDED_BY(mu_);
  size_t head_ GUARDED_BY(mu_) = 0;
  size_t size_ GUARDED_BY(mu_) = 0;
  size_t max_depth_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
  uint64_t total_pushed_ GUARDED_BY(mu_) = 0;
  uint64_t total_popped_ GUARDED_BY(mu_) = 0;
  WaitStats push_ GUARDED_BY(mu_);
  WaitStats pop_ GUARDED_BY(mu_);
};

}  // namespace tandem
