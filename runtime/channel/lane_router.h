// LaneRouter: the arithmetic of a channel with route = "replica" (channel.h): which lane a
// producer's next item goes down, which lane a consumer reads next, how many items a consumer
// can take now, and whether a producer's next item fits. It counts items and never holds
// them; Channel<T> keeps the items in ChannelLanes (channel_lane.h) and asks the router.
//
// Model. P producers, C consumers, one FIFO lane per (producer p, consumer c). Producer p's
// s-th item has the global index g = s * P + p and goes to consumer g % C. Consumer c takes
// its items in increasing g: it reads the positions g = c, c + C, c + 2C, ... in turn; the
// producer of position g is g % P. A position whose producer finished before producing it
// is void and skipped. So consumer c's sequence is a pure function of what each producer
// produced. Producer p feeds consumer c at all iff p = c (mod gcd(P, C)).
//
// Capacity. Consumer c owns a share of the capacity (capacity / C, the first capacity % C
// consumers one more). Producer p may push its next item g to consumer c only when fewer
// than share(c) non-void positions of c's sequence lie between c's cursor and g: a window of
// share(c) positions that *reserves* room for items not pushed yet. Hence
// * at most share(c) items are held for c (all of them inside the window), so the channel
//   holds at most capacity;
// * the item a consumer waits for is always admissible (position 0 of its window), so a
//   slow producer is never shut out by faster ones filling the consumer's share: no
//   deadlock as long as every consumer keeps popping (consumers in lockstep, like the
//   data-parallel drafters, included).
//
// Seam for a transport across processes: every decision here is a pure function of (P, C,
// share, per-producer counts, per-consumer cursors). A producer's process can route by
// itself; a lane whose ends live in two processes becomes a network stream, and the window
// test becomes credit-based flow control (the consumer's process grants share(c) credits
// and returns one per item taken, with the positions it skipped as void once a producer
// reports its final count).
//
// Thread-safety: none; Channel<T> calls it under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem {

class LaneRouter {
 public:
  // REQUIRES: producers >= 1, consumers >= 1, capacity >= consumers.
  LaneRouter(int producers, int consumers, size_t capacity);

  int producers() const { return producers_; }
  int consumers() const { return consumers_; }
  // Lane (p, c) in 0 .. P*C-1.
  size_t Lane(int producer, int consumer) const {
    return static_cast<size_t>(producer) * static_cast<size_t>(consumers_) +
           static_cast<size_t>(consumer);
  }
  // Consumer c's share of the capacity (also the most items lane (p, c) ever holds).
  size_t Share(int consumer) const;
  // True when producer p ever sends consumer c anything.
  bool Feeds(int producer, int consumer) const;

  // Producer side. The consumer producer p's next item goes to.
  int Destination(int producer) const;
  // Whether producer p's next item fits its destination's window (see above).
  bool Admits(int producer) const;
  // Producer p pushed its next item. REQUIRES: Admits(p), !finished(p).
  void Pushed(int producer);
  // Producer p's next item is its item number `seq` (>= sent(p)): the items before it went to
  // consumers in another process, whose positions this router never hands out (a lane fed
  // over the network: channel.h, PushAt). REQUIRES: !finished(p).
  void SkipTo(int producer, uint64_t seq);
  // Producer p produces no more: its later positions are void. Idempotent.
  void Finish(int producer);
  void FinishAll();
  bool finished(int producer) const { return finished_[static_cast<size_t>(producer)]; }
  uint64_t sent(int producer) const { return sent_[static_cast<size_t>(producer)]; }

  // Consumer side. Items consumer c can take now in its order (stops at the first position
  // not pushed yet), counting at most `limit`.
  size_t Ready(int consumer, size_t limit) const;
  // True when nothing beyond what is pushed will ever reach consumer c (every producer that
  // feeds it finished).
  bool Exhausted(int consumer) const { return live_feeders_[static_cast<size_t>(consumer)] == 0; }
  // Consumer c takes its next item: returns the producer whose lane (p, c) holds it and
  // moves c's cursor past it; `seq` (optional) gets the item's number among that producer's
  // items. REQUIRES: Ready(c, 1) == 1.
  int Take(int consumer, uint64_t* seq = nullptr);

 private:
  // The state of position g of some consumer's sequence.
  enum class Slot { kPushed, kPending, kVoid };
  Slot At(int64_t g) const;

  const int producers_;
  const int consumers_;
  const size_t capacity_;
  std::vector<uint64_t> sent_;     // per producer: items pushed
  std::vector<bool> finished_;     // per producer
  std::vector<int64_t> next_;      // per consumer: the smallest position it may still take
  std::vector<int64_t> last_;      // per consumer: the largest position pushed to it, or -1
  std::vector<int> live_feeders_;  // per consumer: unfinished producers that feed it
};

}  // namespace tandem
