#include "runtime/channel/lane_router.h"

#include <algorithm>
#include <numeric>

#include "runtime/core/status.h"

namespace tandem {

LaneRouter::LaneRouter(int producers, int consumers, size_t capacity)
    : producers_(producers),
      consumers_(consumers),
      capacity_(capacity),
      sent_(static_cast<size_t>(producers), 0),
      finished_(static_cast<size_t>(producers), false),
      next_(static_cast<size_t>(consumers)),
      last_(static_cast<size_t>(consumers), -1),
      live_feeders_(static_cast<size_t>(consumers), 0) {
  TANDEM_CHECK_MSG(producers >= 1 && consumers >= 1 && capacity >= static_cast<size_t>(consumers),
                   "LaneRouter({}, {}, {})", producers, consumers, capacity);
  for (int c = 0; c < consumers; ++c) {
    next_[static_cast<size_t>(c)] = c;
    for (int p = 0; p < producers; ++p) live_feeders_[static_cast<size_t>(c)] += Feeds(p, c);
  }
}

size_t LaneRouter::Share(int consumer) const {
  const size_t c = static_cast<size_t>(consumer), n = static_cast<size_t>(consumers_);
  return capacity_ / n + (c < capacity_ % n ? 1 : 0);
}

bool LaneRouter::Feeds(int producer, int consumer) const {
  return (consumer - producer) % std::gcd(producers_, consumers_) == 0;
}

int LaneRouter::Destination(int producer) const {
  const int64_t g = static_cast<int64_t>(sent(producer)) * producers_ + producer;
  return static_cast<int>(g % consumers_);
}

LaneRouter::Slot LaneRouter::At(int64_t g) const {
  const size_t p = static_cast<size_t>(g % producers_);
  const uint64_t s = static_cast<uint64_t>(g / producers_);
  if (s < sent_[p]) return Slot::kPushed;
  return finished_[p] ? Slot::kVoid : Slot::kPending;
}

bool LaneRouter::Admits(int producer) const {
  const int64_t g = static_cast<int64_t>(sent(producer)) * producers_ + producer;
  const int c = static_cast<int>(g % consumers_);
  const size_t share = Share(c);
  // Producer p's own earlier positions in c's sequence are pushed (not void), one every
  // lcm(P, C) / C positions, so this walk ends after at most share * P steps.
  size_t ahead = 0;
  for (int64_t x = next_[static_cast<size_t>(c)]; x < g; x += consumers_) {
    if (At(x) != Slot::kVoid && ++ahead >= share) return false;
  }
  return true;
}

void LaneRouter::Pushed(int producer) {
  const size_t p = static_cast<size_t>(producer);
  const int64_t g = static_cast<int64_t>(sent_[p]) * producers_ + producer;
  int64_t& last = last_[static_cast<size_t>(g % consumers_)];
  last = std::max(last, g);
  ++sent_[p];
}

void LaneRouter::SkipTo(int producer, uint64_t seq) {
  const size_t p = static_cast<size_t>(producer);
  TANDEM_CHECK_MSG(!finished_[p] && seq >= sent_[p], "LaneRouter::SkipTo({}, {}) after {} items{}",
                   producer, seq, sent_[p], finished_[p] ? " (finished)" : "");
  sent_[p] = seq;
}

void LaneRouter::Finish(int producer) {
  const size_t p = static_cast<size_t>(producer);
  if (finished_[p]) return;
  finished_[p] = true;
  for (int c = 0; c < consumers_; ++c)
    if (Feeds(producer, c)) --live_feeders_[static_cast<size_t>(c)];
}

void LaneRouter::FinishAll() {
  for (int p = 0; p < producers_; ++p) Finish(p);
}

size_t LaneRouter::Ready(int consumer, size_t limit) const {
  const size_t c = static_cast<size_t>(consumer);
  size_t n = 0;
  for (int64_t g = next_[c]; n < limit; g += consumers_) {
    const Slot slot = At(g);
    if (slot == Slot::kPushed) {
      ++n;
    } else if (slot == Slot::kPending) {
      break;  // the next item is not pushed yet
    } else if (live_feeders_[c] == 0 && g > last_[c]) {
      break;  // void, and nothing further will ever come
    }
    // A void position with an unfinished feeder left: that feeder's next position comes
    // within lcm(P, C) / C steps and is pushed or pending, so the walk ends.
  }
  return n;
}

int LaneRouter::Take(int consumer, uint64_t* seq) {
  const size_t c = static_cast<size_t>(consumer);
  for (int64_t g = next_[c];; g += consumers_) {
    const Slot slot = At(g);
    TANDEM_CHECK_MSG(
        slot != Slot::kPending && (slot == Slot::kPushed || g <= last_[c] || live_feeders_[c] > 0),
        "LaneRouter::Take({}) with nothing ready", consumer);
    if (slot == Slot::kPushed) {
      next_[c] = g + consumers_;
      if (seq != nullptr) *seq = static_cast<uint64_t>(g / producers_);
      return static_cast<int>(g % producers_);
    }
  }
}

}  // namespace tandem
