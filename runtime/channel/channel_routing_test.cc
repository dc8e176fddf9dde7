// Channel<T> with route = "replica": many producer and consumer threads with random jitter,
// and each consumer's exact sequence checked against a reference computed apart from the
// channel (sort each consumer's items by global index s * P + p).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "runtime/channel/channel.h"

namespace tandem {

// Producer p's s-th item. Its presence in a channel is counted by the hooks below.
struct Routed {
  int producer = -1;
  int seq = -1;
  bool operator==(const Routed&) const = default;
};
std::atomic<int> g_routed_in_channel{0};
std::atomic<int> g_routed_max_in_channel{0};

template <>
struct ChannelHolderHooks<Routed> {
  static void OnEnter(Routed&) {
    const int now = ++g_routed_in_channel;
    int seen = g_routed_max_in_channel.load();
    while (now > seen && !g_routed_max_in_channel.compare_exchange_weak(seen, now)) {
    }
  }
  static void OnLeave(Routed&) { --g_routed_in_channel; }
};

namespace {

using namespace std::chrono_literals;

std::shared_ptr<Channel<Routed>> MakeRouted(int producers, int consumers, size_t capacity,
                                            size_t min_ready = 1) {
  auto ch = Channel<Routed>::Create("lanes", {.capacity = capacity,
                                              .min_ready = min_ready,
                                              .route = ChannelRoute::kReplica,
                                              .producers = producers,
                                              .consumers = consumers});
  TANDEM_CHECK_OK(ch.status());
  return *ch;
}

// The reference: consumer c gets the items with (s * P + p) % C == c, in increasing s * P + p.
std::vector<std::vector<Routed>> Expected(const std::vector<int>& counts, int consumers) {
  const int P = static_cast<int>(counts.size());
  std::vector<std::map<int, Routed>> by_g(static_cast<size_t>(consumers));
  for (int p = 0; p < P; ++p)
    for (int s = 0; s < counts[static_cast<size_t>(p)]; ++s)
      by_g[static_cast<size_t>((s * P + p) % consumers)][s * P + p] = Routed{p, s};
  std::vector<std::vector<Routed>> out(static_cast<size_t>(consumers));
  for (int c = 0; c < consumers; ++c)
    for (const auto& [g, item] : by_g[static_cast<size_t>(c)])
      out[static_cast<size_t>(c)].push_back(item);
  return out;
}

// Jitter so that thread interleavings differ from run to run (not a wait for anything).
void Jitter(std::mt19937& rng) {
  const int r = static_cast<int>(rng() % 8);
  if (r == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
  else if (r < 4)
    std::this_thread::yield();
}

// Producers push counts[p] items each, then FinishProducer; consumers pop (single items or
// batches of random size) until their lanes end. Returns each consumer's sequence.
std::vector<std::vector<Routed>> RunRound(const std::vector<int>& counts, int consumers,
                                          size_t capacity, uint32_t seed, bool close_at_end) {
  const int P = static_cast<int>(counts.size());
  auto ch = MakeRouted(P, consumers, capacity);
  std::vector<std::vector<Routed>> got(static_cast<size_t>(consumers));
  std::atomic<int> producers_left{P};
  std::vector<std::thread> threads;
  for (int p = 0; p < P; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(seed * 977 + static_cast<uint32_t>(p));
      for (int s = 0; s < counts[static_cast<size_t>(p)]; ++s) {
        Jitter(rng);
        Routed item{p, s};
        Status st = ch->PushFrom(p, std::move(item));
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
      // As the runner does: each writer's end finishes its lanes, the last one's closes the
      // channel (close_at_end) or not (the consumers end when their producers have).
      ASSERT_TRUE(ch->FinishProducer(p).ok());
      if (close_at_end && --producers_left == 0) ch->Close();
    });
  }
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(seed * 131 + 7 + static_cast<uint32_t>(c));
      auto& mine = got[static_cast<size_t>(c)];
      while (true) {
        Jitter(rng);
        if (rng() % 2 == 0) {
          Result<Routed> r = ch->PopAs(c);
          if (!r.ok()) {
            ASSERT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
            return;
          }
          mine.push_back(*r);
        } else {
          Result<std::vector<Routed>> r = ch->PopBatchAs(c, 1 + rng() % 4, 1s);
          if (!r.ok() && r.status().code() == StatusCode::kDeadlineExceeded) continue;
          if (!r.ok()) {
            ASSERT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
            return;
          }
          mine.insert(mine.end(), r->begin(), r->end());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const ChannelStats s = ch->Stats();
  int64_t total = 0;
  for (int n : counts) total += n;
  EXPECT_EQ(s.total_pushed, static_cast<uint64_t>(total));
  EXPECT_EQ(s.total_popped, static_cast<uint64_t>(total));
  EXPECT_EQ(s.depth, 0u);
  EXPECT_LE(s.max_depth, capacity);
  return got;
}

void CheckRounds(const std::vector<int>& counts, int consumers, size_t capacity) {
  const auto expected = Expected(counts, consumers);
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    for (bool close_at_end : {false, true}) {
      g_routed_max_in_channel = 0;
      auto got = RunRound(counts, consumers, capacity, seed, close_at_end);
      for (int c = 0; c < consumers; ++c)
        ASSERT_EQ(got[static_cast<size_t>(c)], expected[static_cast<size_t>(c)])
            << "consumer " << c << ", seed " << seed << ", close_at_end " << close_at_end;
      EXPECT_EQ(g_routed_in_channel.load(), 0);
      EXPECT_LE(g_routed_max_in_channel.load(), static_cast<int>(capacity));
    }
  }
}

TEST(ChannelRoutingTest, OneProducerTwoConsumers) { CheckRounds({200}, 2, 3); }
TEST(ChannelRoutingTest, TwoProducersOneConsumer) { CheckRounds({150, 150}, 1, 2); }
TEST(ChannelRoutingTest, TwoProducersTwoConsumers) { CheckRounds({150, 150}, 2, 4); }
TEST(ChannelRoutingTest, ThreeProducersTwoConsumers) { CheckRounds({100, 100, 100}, 2, 2); }
TEST(ChannelRoutingTest, FiveProducersThreeConsumersSmallCapacity) {
  CheckRounds({40, 40, 40, 40, 40}, 3, 3);
}
// Producers that finish early (one after no items at all): consumers skip their lanes once
// drained and neither side hangs.
TEST(ChannelRoutingTest, EarlyFinishingProducers) { CheckRounds({5, 120, 0, 60}, 3, 3); }

TEST(ChannelRoutingTest, LockstepConsumersDoNotDeadlockAtMinimalCapacity) {
  // Data-parallel consumers take one item per step and wait for each other (a barrier, like
  // the gradient all-reduce) with one slot each; three producers race to fill them.
  constexpr int kP = 3, kC = 2, kSteps = 150;
  auto ch = MakeRouted(kP, kC, kC);
  std::barrier step(kC);
  std::vector<std::vector<Routed>> got(kC);
  std::vector<std::thread> threads;
  for (int p = 0; p < kP; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(static_cast<uint32_t>(p));
      for (int s = 0;; ++s) {
        Jitter(rng);
        Routed item{p, s};
        Status st = ch->PushFrom(p, std::move(item));
        if (!st.ok()) {
          EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
          return;
        }
      }
    });
  }
  for (int c = 0; c < kC; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < kSteps; ++i) {
        Result<Routed> r = ch->PopAs(c);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        got[static_cast<size_t>(c)].push_back(*r);
        step.arrive_and_wait();
      }
      ch->Close();  // every consumer at the last step: producers must wake and stop
    });
  }
  for (auto& t : threads) t.join();
  const auto expected = Expected({kSteps * kC, kSteps * kC, kSteps * kC}, kC);
  for (int c = 0; c < kC; ++c) {
    std::vector<Routed> want(expected[static_cast<size_t>(c)].begin(),
                             expected[static_cast<size_t>(c)].begin() + kSteps);
    EXPECT_EQ(got[static_cast<size_t>(c)], want) << "consumer " << c;
  }
}

TEST(ChannelRoutingTest, ConsumerCloseWakesBlockedProducersAndOthersDrainInOrder) {
  constexpr int kP = 2, kC = 2;
  auto ch = MakeRouted(kP, kC, 4);
  std::atomic<int> refused{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kP; ++p) {
    producers.emplace_back([&, p] {
      for (int s = 0;; ++s) {
        Routed item{p, s};
        Status st = ch->PushFrom(p, std::move(item));
        if (!st.ok()) {
          EXPECT_EQ(st.code(), StatusCode::kUnavailable);
          EXPECT_EQ(item.seq, s) << "a refused item stays with the caller";
          ++refused;
          return;
        }
      }
    });
  }
  // Consumer 0 takes 5 items, then closes: both producers (blocked on full windows) wake.
  std::vector<Routed> first;
  for (int i = 0; i < 5; ++i) {
    Result<Routed> r = ch->PopAs(0);
    ASSERT_TRUE(r.ok());
    first.push_back(*r);
  }
  ch->Close();
  for (auto& t : producers) t.join();
  EXPECT_EQ(refused.load(), kP);
  const auto expected = Expected({100, 100}, kC);
  EXPECT_EQ(first, std::vector<Routed>(expected[0].begin(), expected[0].begin() + 5));
  // Consumer 1 drains what was pushed to it before the close, in its order, then ends.
  std::vector<Routed> rest;
  while (true) {
    Result<Routed> r = ch->PopAs(1);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
      break;
    }
    rest.push_back(*r);
  }
  EXPECT_EQ(rest, std::vector<Routed>(expected[1].begin(), expected[1].begin() + rest.size()));
  EXPECT_LE(rest.size(), 2u) << "consumer 1's share of capacity 4";
  EXPECT_EQ(g_routed_in_channel.load(), static_cast<int>(ch->Stats().depth));
}

TEST(ChannelRoutingTest, MinReadyCountsOnlyItemsTheConsumerCanTakeInOrder) {
  auto ch = MakeRouted(2, 1, 4, /*min_ready=*/2);
  ASSERT_TRUE(ch->PushFrom(1, Routed{1, 0}).ok());  // g = 1
  ASSERT_TRUE(ch->PushFrom(1, Routed{1, 1}).ok());  // g = 3
  // Two items queued, but g = 0 (producer 0) comes first: nothing is ready yet.
  EXPECT_EQ(ch->PopAs(0, 0ms).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ch->PopAs(0, 5ms).status().code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(ch->PushFrom(0, Routed{0, 0}).ok());  // g = 0
  auto batch = ch->PopBatchAs(0, 10, 0ms);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(*batch, (std::vector<Routed>{{0, 0}, {1, 0}}));  // stops at g = 2 (pending)
  // Producer 0 finished: g = 2 is void, g = 3 becomes ready (and the end drains it below
  // min_ready).
  ASSERT_TRUE(ch->FinishProducer(0).ok());
  ASSERT_TRUE(ch->FinishProducer(1).ok());
  auto last = ch->PopAs(0, 0ms);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(*last, (Routed{1, 1}));
  EXPECT_EQ(ch->PopAs(0, 0ms).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(g_routed_in_channel.load(), 0);
}

TEST(ChannelRoutingTest, PushWaitsForTheWindowAndTimesOutLeavingTheItem) {
  auto ch = MakeRouted(2, 1, 2);
  ASSERT_TRUE(ch->PushFrom(1, Routed{1, 0}).ok());
  Routed item{1, 1};
  Status st = ch->PushFrom(1, std::move(item), 5ms);  // g = 3: window {0, 1} taken
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_EQ(item, (Routed{1, 1}));
  EXPECT_TRUE(ch->PushFrom(0, Routed{0, 0}, 0ms).ok()) << "the awaited item always fits";
  const ChannelStats s = ch->Stats();
  EXPECT_EQ(s.route, "replica");
  EXPECT_EQ(s.depth, 2u);
  EXPECT_GE(s.push_waits, 1u);
  EXPECT_NE(FormatChannelStats(s).find("lanes 2x1"), std::string::npos) << FormatChannelStats(s);
}

TEST(ChannelRoutingTest, ItemsLeftInLanesLeaveTheHoldersWhenTheChannelGoes) {
  {
    auto ch = MakeRouted(2, 2, 4);
    ASSERT_TRUE(ch->PushFrom(0, Routed{0, 0}).ok());
    ASSERT_TRUE(ch->PushFrom(1, Routed{1, 0}).ok());
    EXPECT_EQ(g_routed_in_channel.load(), 2);
  }
  EXPECT_EQ(g_routed_in_channel.load(), 0);
}

TEST(ChannelRoutingTest, IndicesAreChecked) {
  auto ch = MakeRouted(2, 3, 6);
  EXPECT_EQ(ch->Push(Routed{0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->PushFrom(2, Routed{2, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->TryPop().status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->PopAs(3, 0ms).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(ch->FinishProducer(0).ok());
  EXPECT_EQ(ch->PushFrom(0, Routed{0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->FinishProducer(-1).code(), StatusCode::kInvalidArgument);
  // One producer, one consumer: the plain calls name them.
  auto single = MakeRouted(1, 1, 2);
  EXPECT_TRUE(single->Push(Routed{0, 0}).ok());
  EXPECT_TRUE(single->TryPop().ok());
}

TEST(ChannelRoutingTest, RejectsCapacityThatLeavesAConsumerNoRoom) {
  auto few = Channel<int>::Create(
      "c", {.capacity = 2, .route = ChannelRoute::kReplica, .producers = 1, .consumers = 3});
  EXPECT_EQ(few.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(few.status().message().find("at least 3"), std::string::npos);
  auto ready = Channel<int>::Create(
      "c", {.capacity = 5, .min_ready = 3, .route = ChannelRoute::kReplica, .consumers = 2});
  EXPECT_EQ(ready.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ready.status().message().find("min_ready"), std::string::npos);
  auto any = Channel<int>::Create("c", {.capacity = 2, .consumers = 3});
  EXPECT_TRUE(any.ok()) << "route any ignores the replica counts";
}


// A lane fed over the network: one producer feeds two consumers; a process running only
// consumer 1 receives that consumer's items with their numbers (PopTaggedAs on the
// producer's side, PushAt on the consumer's) and sees the one-process sequence.
TEST(ChannelRoutingTest, TaggedPopsPushedAtTheirNumbersKeepTheOrder) {
  auto sender = MakeRouted(1, 2, 8);
  auto receiver = MakeRouted(1, 2, 8);
  for (int s = 0; s < 6; ++s) ASSERT_TRUE(sender->PushFrom(0, Routed{0, s}, 1s).ok());
  ASSERT_TRUE(sender->FinishProducer(0).ok());
  std::vector<int> got;
  while (true) {
    auto t = sender->PopTaggedAs(1, 1s);
    if (!t.ok()) break;
    EXPECT_EQ(t->producer, 0);
    EXPECT_EQ(static_cast<int>(t->seq), t->item.seq);
    ASSERT_TRUE(receiver->PushAt(t->producer, t->seq, std::move(t->item), 1s).ok());
  }
  ASSERT_TRUE(receiver->FinishProducer(0).ok());
  while (true) {
    auto item = receiver->PopAs(1, 1s);
    if (!item.ok()) break;
    got.push_back(item->seq);
  }
  EXPECT_EQ(got, (std::vector<int>{1, 3, 5}));
  // A number that goes backwards is refused, naming it.
  auto again = MakeRouted(1, 2, 4);
  ASSERT_TRUE(again->PushAt(0, 3, Routed{0, 3}, 1s).ok());
  Status back = again->PushAt(0, 1, Routed{0, 1}, 1s);
  EXPECT_EQ(back.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(back.message().find("item 1 arrived after item 3"), std::string::npos) << back.ToString();
}

}  // namespace
}  // namespace tandem
