// Channel<T>: a bounded multi-producer multi-consumer queue between actors.
//
//   ASSIGN_OR_RETURN(auto ch, Channel<Batch>::Create("hidden", {.capacity = 60, .min_ready = 1}));
//   RETURN_IF_ERROR(ch->Push(std::move(batch)));          // waits while full
//   ASSIGN_OR_RETURN(Batch b, ch->Pop());                 // waits for min_ready items
//   ASSIGN_OR_RETURN(auto v, ch->PopBatch(1, 8, 50ms));   // 1..8 items within 50 ms
//
// Routing (ChannelOptions::route):
// * "any": one shared FIFO; which consumer takes which item is a race.
// * "replica": producers and consumers name themselves by replica index (PushFrom, PopAs,
//   PopBatchAs) and the channel is a set of FIFO lanes, one per (producer p, consumer c).
//   Producer p's s-th item goes to consumer (s * P + p) % C, and consumer c takes its items
//   in increasing global index s * P + p: a fixed rotation over the lanes that feed it,
//   skipping a lane whose producer finished (FinishProducer, or Close) and is drained. So
//   each consumer's sequence depends only on what each producer produced, never on thread
//   timing. Each consumer owns a share of the capacity (capacity / C, the first
//   capacity % C one more); a producer's next item waits only while its consumer's window
//   of that many positions is taken, and the item a consumer waits for always fits, so no
//   producer is starved by another (lane_router.h has the details). The plain
//   Push/Pop/PopBatch work on such a channel only with one producer (Push) or one consumer
//   (Pop, PopBatch); otherwise they fail with InvalidArgument.
//
// Contracts (both routes; "queued" and "closed" are per consumer under "replica": the items
// it can take in its order, and whether anything more can reach it):
// * Push waits while the channel is full. On any error the pushed item is left untouched in
//   the caller's variable (the rvalue is only moved from on success).
// * A consumer takes nothing until at least min_ready items are queued, or the channel is
//   closed (then it drains what is left regardless of min_ready).
// * After Close(): pushes fail with Unavailable; pops succeed until the channel is empty,
//   then fail with Unavailable. Blocked threads wake at once. Under "replica" a consumer
//   whose producers have all finished (FinishProducer) sees its lanes as closed too.
// * Timed calls fail with DeadlineExceeded when the timeout passes first.
// * ChannelHolderHooks<T>::OnEnter runs when an item enters the channel and OnLeave when it
//   leaves (popped, or destroyed with the channel). A specialisation lets a channel of
//   ObjectRefs count its refs as channel holdings (see ref_channel.h). Hooks run under the
//   channel's lock: they must be cheap and must not call back into the channel.
//
// Lanes are explicit objects (ChannelLane<T>, channel_lane.h) and the routing arithmetic is
// apart from them (LaneRouter): the seam where a lane whose producer and consumer live in two
// processes would be backed by a network transport.
//
// Thread-safety: all methods are safe from any thread. Items live in lanes preallocated at
// Create() (one ring of `capacity`; under "replica", P * C rings of the consumer's share), so
// push and pop do not allocate (PopBatch allocates its result vector).
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
#include "runtime/channel/channel_lane.h"
#include "runtime/channel/lane_router.h"
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

// "Whichever replica": what the plain Push/Pop pass as producer or consumer index.
inline constexpr int kAnyReplica = -1;

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
    for (ChannelLane<T>& lane : lanes_) {
      while (!lane.empty()) TakeLocked(lane);
    }
  }

  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  const std::string& name() const override { return name_; }
  const std::type_info& item_type() const override { return typeid(T); }
  const ChannelOptions& options() const { return options_; }

  Status Push(T&& item) { return PushFrom(kAnyReplica, std::move(item), kWaitForever); }
  // Fails with DeadlineExceeded at once if the channel is full.
  Status TryPush(T&& item) { return PushFrom(kAnyReplica, std::move(item), Duration::zero()); }
  Status PushFor(T&& item, Duration timeout) {
    return PushFrom(kAnyReplica, std::move(item), timeout);
  }
  // Push as producer replica `producer` (0 .. producers-1; ignored under "any").
  // InvalidArgument for an index out of range, kAnyReplica with several producers under
  // "replica", or a producer already finished.
  Status PushFrom(int producer, T&& item, Duration timeout = kWaitForever) {
    return PushImpl(producer, std::nullopt, std::move(item), timeout);
  }
  // Under "replica": pushes `item` as producer `producer`'s item number `seq` (0, 1, ...),
  // for a producer in another process whose items reach this one over a network link
  // (runtime/transfer): its items numbered below `seq` went to consumers that this process
  // does not run, so `seq` decides the consumer exactly as if the producer pushed here. Each
  // process must receive all of a producer's items for its own consumers that the producer
  // feeds, in order. InvalidArgument when `seq` goes backwards; otherwise as PushFrom. Under
  // "any", the same as PushFrom.
  Status PushAt(int producer, uint64_t seq, T&& item, Duration timeout = kWaitForever) {
    return PushImpl(producer, seq, std::move(item), timeout);
  }

  // An item with where it came from: the producer and its number among that producer's
  // items (under "any": producer 0 and the channel's pop count).
  struct Tagged {
    T item;
    int producer = 0;
    uint64_t seq = 0;
  };
  // As PopAs, with the item's producer and number (what a link to another process sends on).
  Result<Tagged> PopTaggedAs(int consumer, Duration timeout = kWaitForever) {
    std::unique_lock lock(mu_);
    ASSIGN_OR_RETURN(const int c, ResolveLocked(consumer, options_.consumers, "consumer"));
    RETURN_IF_ERROR(WaitForItemsLocked(lock, c, ReadyThreshold(), timeout));
    int producer = 0;
    uint64_t seq = 0;
    T item = TakeNextLocked(c, &producer, &seq);
    lock.unlock();
    Tagged t{std::move(item), producer, seq};
    not_full_.notify_all();
    return t;
  }

 private:
  Status PushImpl(int producer, std::optional<uint64_t> seq, T&& item, Duration timeout) {
    std::unique_lock lock(mu_);
    ASSIGN_OR_RETURN(const int p, ResolveLocked(producer, options_.producers, "producer"));
    if (router_ && router_->finished(p) && !closed_)
      return InvalidArgumentError("channel '{}': producer {} already finished; push refused", name_,
                                  p);
    if (seq && router_ && !router_->finished(p)) {
      if (*seq < router_->sent(p))
        return InvalidArgumentError("channel '{}': producer {}'s item {} arrived after item {}",
                                    name_, p, *seq, router_->sent(p) - 1);
      router_->SkipTo(p, *seq);
    }
    RETURN_IF_ERROR(WaitLocked(lock, timeout, /*producer=*/true, [&] {
      return closed_ || (router_ && router_->finished(p)) || FitsLocked(p);
    }));
    if (closed_) return UnavailableError("channel '{}' is closed; push refused", name_);
    if (router_ && router_->finished(p))
      return InvalidArgumentError("channel '{}': producer {} finished while pushing", name_, p);
    ChannelLane<T>& lane = router_ ? lanes_[router_->Lane(p, router_->Destination(p))] : lanes_[0];
    if (router_) router_->Pushed(p);
    ChannelHolderHooks<T>::OnEnter(lane.Put(std::move(item)));
    ++size_;
    ++total_pushed_;
    max_depth_ = std::max(max_depth_, size_);
    lock.unlock();
    ready_.notify_all();  // consumers may wait for different thresholds
    return Status::Ok();
  }

 public:

  // One item, waiting for min_ready items (or close).
  Result<T> Pop() { return PopAs(kAnyReplica, kWaitForever); }
  Result<T> TryPop() { return PopAs(kAnyReplica, Duration::zero()); }
  Result<T> PopFor(Duration timeout) { return PopAs(kAnyReplica, timeout); }
  // Pop as consumer replica `consumer` (0 .. consumers-1; ignored under "any").
  // InvalidArgument for an index out of range, or kAnyReplica with several consumers
  // under "replica".
  Result<T> PopAs(int consumer, Duration timeout = kWaitForever) {
    std::unique_lock lock(mu_);
    ASSIGN_OR_RETURN(const int c, ResolveLocked(consumer, options_.consumers, "consumer"));
    RETURN_IF_ERROR(WaitForItemsLocked(lock, c, ReadyThreshold(), timeout));
    T item = TakeNextLocked(c);
    lock.unlock();
    not_full_.notify_all();  // under "replica", the freed room may be another producer's
    return item;
  }

  // Between 1 and `max` items, once at least `min_ready` (0 behaves as 1) are queued or the
  // channel is closed. REQUIRES: 1 <= max, min_ready <= capacity (under "replica", <= the
  // consumer's share).
  Result<std::vector<T>> PopBatch(size_t min_ready, size_t max, Duration timeout) {
    return PopBatchAs(kAnyReplica, min_ready, max, timeout);
  }
  // As above with the channel's own min_ready.
  Result<std::vector<T>> PopBatch(size_t max, Duration timeout) {
    return PopBatchAs(kAnyReplica, ReadyThreshold(), max, timeout);
  }
  Result<std::vector<T>> PopBatchAs(int consumer, size_t max, Duration timeout) {
    return PopBatchAs(consumer, ReadyThreshold(), max, timeout);
  }
  Result<std::vector<T>> PopBatchAs(int consumer, size_t min_ready, size_t max, Duration timeout) {
    std::unique_lock lock(mu_);
    ASSIGN_OR_RETURN(const int c, ResolveLocked(consumer, options_.consumers, "consumer"));
    const size_t room = router_ ? router_->Share(c) : options_.capacity;
    TANDEM_CHECK_MSG(max >= 1 && min_ready <= room,
                     "channel '{}': PopBatch(min_ready={}, max={}) with room for {}", name_,
                     min_ready, max, room);
    RETURN_IF_ERROR(WaitForItemsLocked(lock, c, std::max<size_t>(min_ready, 1), timeout));
    const size_t n = std::min(max, QueuedLocked(c, max));
    std::vector<T> items;
    items.reserve(n);
    for (size_t i = 0; i < n; ++i) items.push_back(TakeNextLocked(c));
    lock.unlock();
    not_full_.notify_all();
    return items;
  }

  // Under "replica": producer `producer` produces no more, so consumers skip its lane once it
  // is drained (and a consumer none of whose producers is left drains and ends). Wakes
  // waiting consumers. A no-op under "any" (Close ends the stream) and when repeated.
  // InvalidArgument for an index out of range.
  Status FinishProducer(int producer) override {
    {
      std::lock_guard lock(mu_);
      if (!router_) return Status::Ok();
      ASSIGN_OR_RETURN(const int p, ResolveLocked(producer, options_.producers, "producer"));
      router_->Finish(p);
    }
    ready_.notify_all();
    not_full_.notify_all();  // its void positions no longer take room in windows
    return Status::Ok();
  }

  void Close() override {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      if (router_) router_->FinishAll();
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
    s.route = std::string(ChannelRouteName(options_.route));
    s.producers = options_.producers;
    s.consumers = options_.consumers;
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
      : name_(std::move(name)), options_(options), clock_(clock) {
    if (options.route == ChannelRoute::kReplica) {
      router_.emplace(options.producers, options.consumers, options.capacity);
      lanes_.reserve(static_cast<size_t>(options.producers) *
                     static_cast<size_t>(options.consumers));
      for (int p = 0; p < options.producers; ++p)
        for (int c = 0; c < options.consumers; ++c)
          lanes_.emplace_back(router_->Feeds(p, c) ? router_->Share(c) : 0);
    } else {
      lanes_.emplace_back(options.capacity);
    }
  }

  size_t ReadyThreshold() const { return std::max<size_t>(options_.min_ready, 1); }

  // The replica index a call acts as: 0 under "any" (one lane), `index` under "replica"
  // (kAnyReplica names the only one).
  Result<int> ResolveLocked(int index, int count, const char* what) const REQUIRES(mu_) {
    if (!router_) return 0;
    if (index >= 0 && index < count) return index;
    if (index == kAnyReplica && count == 1) return 0;
    if (index == kAnyReplica) {
      return InvalidArgumentError(
          "channel '{}' routes by replica and has {} {}s: name the {} (PushFrom/PopAs)", name_,
          count, what, what);
    }
    return InvalidArgumentError("channel '{}': {} {} is out of range [0, {})", name_, what, index,
                                count);
  }

  // Whether producer p's next item fits now.
  bool FitsLocked(int p) const REQUIRES(mu_) {
    return router_ ? router_->Admits(p) : size_ < options_.capacity;
  }
  // Items consumer c can take now (at most `limit`).
  size_t QueuedLocked(int c, size_t limit) const REQUIRES(mu_) {
    return router_ ? router_->Ready(c, limit) : std::min(size_, limit);
  }
  // Nothing more will reach consumer c.
  bool EndedLocked(int c) const REQUIRES(mu_) {
    return closed_ || (router_ && router_->Exhausted(c));
  }

  Status WaitForItemsLocked(std::unique_lock<std::mutex>& lock, int c, size_t threshold,
                            Duration timeout) REQUIRES(mu_) {
    RETURN_IF_ERROR(WaitLocked(lock, timeout, /*producer=*/false, [&] {
      return EndedLocked(c) || QueuedLocked(c, threshold) >= threshold;
    }));
    if (QueuedLocked(c, 1) == 0) {
      if (closed_) return UnavailableError("channel '{}' is closed and drained", name_);
      return UnavailableError(
          "channel '{}': every producer of consumer {} finished and its "
          "lanes are drained",
          name_, c);
    }
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

  // Consumer c's next item. REQUIRES: QueuedLocked(c, 1) == 1.
  // `producer` and `seq` (optional) get the item's producer and number (Tagged).
  T TakeNextLocked(int c, int* producer = nullptr, uint64_t* seq = nullptr) REQUIRES(mu_) {
    if (!router_) {
      if (producer != nullptr) *producer = 0;
      if (seq != nullptr) *seq = total_popped_;
      return TakeLocked(lanes_[0]);
    }
    const int p = router_->Take(c, seq);
    if (producer != nullptr) *producer = p;
    return TakeLocked(lanes_[router_->Lane(p, c)]);
  }

  T TakeLocked(ChannelLane<T>& lane) REQUIRES(mu_) {
    ChannelHolderHooks<T>::OnLeave(lane.Front());
    T item = lane.Take();
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
  std::optional<LaneRouter> router_ GUARDED_BY(mu_);  // "replica" only
  // "any": one lane. "replica": lane (p, c) at router_->Lane(p, c); lanes that carry nothing
  // (the producer never feeds the consumer) have no slots.
  std::vector<ChannelLane<T>> lanes_ GUARDED_BY(mu_);
  size_t size_ GUARDED_BY(mu_) = 0;  // items held in all lanes
  size_t max_depth_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
  uint64_t total_pushed_ GUARDED_BY(mu_) = 0;
  uint64_t total_popped_ GUARDED_BY(mu_) = 0;
  WaitStats push_ GUARDED_BY(mu_);
  WaitStats pop_ GUARDED_BY(mu_);
};

}  // namespace tandem
