// ChannelLane<T>: one FIFO of a channel, a ring of `capacity` slots allocated up front. A
// channel with route = "any" has one lane that every producer and consumer shares; one with
// route = "replica" has a lane per (producer, consumer) pair (lane_router.h says which).
//
// The lane is where a transport would go: a lane whose producer and consumer live in two
// processes keeps this interface (Put on the producer's side, Take on the consumer's) over a
// network stream instead of a ring, while the routing stays in LaneRouter.
//
// Thread-safety: none; the owning Channel<T> calls it under its lock.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/core/status.h"

namespace tandem {

template <class T>
class ChannelLane {
 public:
  explicit ChannelLane(size_t capacity) : ring_(capacity) {}

  size_t size() const { return size_; }
  size_t capacity() const { return ring_.size(); }
  bool empty() const { return size_ == 0; }

  // Appends `item` and returns it in its slot. REQUIRES: size() < capacity().
  T& Put(T&& item) {
    TANDEM_CHECK_MSG(size_ < ring_.size(), "channel lane overflow ({} slots)", ring_.size());
    std::optional<T>& slot = ring_[(head_ + size_) % ring_.size()];
    slot.emplace(std::move(item));
    ++size_;
    return *slot;
  }
  // The oldest item, still in its slot. REQUIRES: !empty().
  T& Front() { return *ring_[head_]; }
  // Removes and returns the oldest item. REQUIRES: !empty().
  T Take() {
    std::optional<T>& slot = ring_[head_];
    T item = std::move(*slot);
    slot.reset();
    head_ = (head_ + 1) % ring_.size();
    --size_;
    return item;
  }

 private:
  std::vector<std::optional<T>> ring_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace tandem
