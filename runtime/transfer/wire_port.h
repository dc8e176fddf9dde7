// WirePort: one channel's items as the object links see them, whatever their C++ type; and
// WireChannels, the per-job table saying which channels can cross nodes with which item
// type.
//
// A class whose items may cross nodes registers its channel in the job's registry before
// the job's links start (from its job-prepare hook, runtime/job/job_prepare.h):
//
//   registry.Get<transfer::WireChannels>().Register<HiddenBatch>("hidden");
//
// The links then open a WirePort on the channel: Pop encodes the next item of a consumer that
// runs on another node (WireCodec<T>, wire.h) and keeps the item itself as the hold, its
// refs counted as in flight (HolderKind::kInFlight) until the link drops the hold on the
// receiver's acknowledgement; Push decodes an item on the receiving node into its store and
// pushes it at its producer and number (Channel::PushAt).
//
// Thread-safety: WireChannels is safe from any thread. A WirePort may be used from several
// threads at once (its channel is thread-safe), one Pop per consumer at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/channel/channel_registry.h"
#include "runtime/channel/ref_channel.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/store/object_store.h"
#include "runtime/transfer/wire.h"

namespace tandem::transfer {

// An encoded item on its way out, with what keeps its objects alive until acknowledged.
struct OutgoingItem {
  int producer = 0;
  uint64_t seq = 0;
  std::string meta;
  std::vector<WireSpan> objects;
  uint64_t object_bytes = 0;
  std::shared_ptr<void> hold;
};

class WirePort {
 public:
  virtual ~WirePort() = default;
  virtual ChannelBase& channel() = 0;
  // Consumer `consumer`'s next item, encoded (as Channel::PopTaggedAs otherwise).
  virtual Result<OutgoingItem> Pop(int consumer, Duration timeout) = 0;
  // Decodes an item from `r` into `store` and pushes it as producer `producer`'s item `seq`,
  // waiting for room until `stopping()` says to give up (Cancelled). Unavailable when the
  // channel is closed: the item is decoded and dropped.
  virtual Status Push(int producer, uint64_t seq, WireReader& r,
                      const std::function<bool()>& stopping) = 0;
};

namespace internal {

template <class T>
void MarkInFlight(T& item) {
  if constexpr (std::is_same_v<T, ObjectRef>) {
    if (item) item.SetHolder(HolderKind::kInFlight);
  } else if constexpr (HoldsObjectRefs<T>) {
    item.ForEachRef([](ObjectRef& r) {
      if (r) r.SetHolder(HolderKind::kInFlight);
    });
  }
}

template <WireItem T>
class TypedWirePort final : public WirePort {
 public:
  explicit TypedWirePort(std::shared_ptr<Channel<T>> ch) : ch_(std::move(ch)) {}

  ChannelBase& channel() override { return *ch_; }

  Result<OutgoingItem> Pop(int consumer, Duration timeout) override {
    ASSIGN_OR_RETURN(typename Channel<T>::Tagged t, ch_->PopTaggedAs(consumer, timeout));
    auto held = std::make_shared<T>(std::move(t.item));
    MarkInFlight(*held);
    WireWriter w;
    WireCodec<T>::Encode(*held, w);
    OutgoingItem out;
    out.producer = t.producer;
    out.seq = t.seq;
    out.object_bytes = w.object_bytes();
    out.meta = w.TakeMeta();
    out.objects = w.TakeObjects();
    out.hold = std::move(held);
    return out;
  }

  Status Push(int producer, uint64_t seq, WireReader& r,
              const std::function<bool()>& stopping) override {
    ASSIGN_OR_RETURN(T item, WireCodec<T>::Decode(r));
    RETURN_IF_ERROR(r.Finish());
    while (true) {
      Status st = ch_->PushAt(producer, seq, std::move(item), std::chrono::milliseconds(100));
      if (st.code() != StatusCode::kDeadlineExceeded) return st;
      if (stopping()) return CancelledError("channel '{}': the link is stopping", ch_->name());
    }
  }

 private:
  std::shared_ptr<Channel<T>> ch_;
};

}  // namespace internal

class WireChannels {
 public:
  using Factory = std::function<Result<std::unique_ptr<WirePort>>(ChannelRegistry&)>;

  // Items of channel `channel` are T (the same type its actors open it with). A second
  // registration of the channel replaces the first (every node runs the same hooks).
  template <WireItem T>
  void Register(const std::string& channel) EXCLUDES(mu_) {
    std::lock_guard lock(mu_);
    factories_[channel] = [channel](ChannelRegistry& reg) -> Result<std::unique_ptr<WirePort>> {
      ASSIGN_OR_RETURN(std::shared_ptr<Channel<T>> ch, reg.Open<T>(channel));
      return std::unique_ptr<WirePort>(new internal::TypedWirePort<T>(std::move(ch)));
    };
  }

  // A port on `channel` of `reg`. InvalidArgument naming the channel when no item type
  // was registered for it (nothing says how its items cross nodes).
  Result<std::unique_ptr<WirePort>> Open(const std::string& channel, ChannelRegistry& reg) const
      EXCLUDES(mu_) {
    Factory f;
    {
      std::lock_guard lock(mu_);
      auto it = factories_.find(channel);
      if (it == factories_.end())
        return InvalidArgumentError(
            "channel '{}' crosses nodes, but no actor class registered how its items cross "
            "(transfer::WireChannels::Register)", channel);
      f = it->second;
    }
    return f(reg);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Factory> factories_ GUARDED_BY(mu_);
};

}  // namespace tandem::transfer
