#include "runtime/channel/channel.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tandem {

// An item whose presence in a channel is counted by a hook specialisation.
struct Tracked {
  int value = 0;
  bool in_channel = false;
};
std::atomic<int> g_tracked_in_channel{0};

template <>
struct ChannelHolderHooks<Tracked> {
  static void OnEnter(Tracked& t) {
    t.in_channel = true;
    ++g_tracked_in_channel;
  }
  static void OnLeave(Tracked& t) {
    t.in_channel = false;
    --g_tracked_in_channel;
  }
};

namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

template <class T>
std::shared_ptr<Channel<T>> Make(size_t capacity, size_t min_ready = 1) {
  auto ch = Channel<T>::Create("test", {.capacity = capacity, .min_ready = min_ready});
  TANDEM_CHECK_OK(ch.status());
  return *ch;
}

// Polls until `cond` holds; fails the test after 10 s (a hang, not a timing assertion).
template <class F>
void WaitUntil(F cond) {
  const auto deadline = SteadyClock::now() + 10s;
  while (!cond()) {
    ASSERT_LT(SteadyClock::now(), deadline) << "condition never became true";
    // A poll interval, not a timing assumption: blocked-thread counts have no notification,
    // and the loop ends as soon as the condition holds, however loaded the machine.
    std::this_thread::sleep_for(1ms);
  }
}

TEST(ChannelTest, RejectsInvalidOptions) {
  auto zero = Channel<int>::Create("c", {.capacity = 0, .min_ready = 0});
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  auto over = Channel<int>::Create("c", {.capacity = 4, .min_ready = 5});
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("min_ready (5) exceeds capacity (4)"), std::string::npos);
}

TEST(ChannelTest, FifoAndFullChannelLeavesItemUntouched) {
  auto ch = Make<std::unique_ptr<int>>(2);
  ASSERT_TRUE(ch->Push(std::make_unique<int>(1)).ok());
  ASSERT_TRUE(ch->Push(std::make_unique<int>(2)).ok());
  auto third = std::make_unique<int>(3);
  Status st = ch->TryPush(std::move(third));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  ASSERT_NE(third, nullptr) << "a refused push must not consume the item";
  EXPECT_EQ(*third, 3);
  EXPECT_EQ(**ch->Pop(), 1);
  EXPECT_EQ(**ch->Pop(), 2);
  EXPECT_EQ(ch->TryPop().status().code(), StatusCode::kDeadlineExceeded);
}

TEST(ChannelTest, WrapsAroundRing) {
  auto ch = Make<int>(3);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(ch->Push(int{i}).ok());
    ASSERT_TRUE(ch->Push(int{100 + i}).ok());
    EXPECT_EQ(*ch->Pop(), i);
    EXPECT_EQ(*ch->Pop(), 100 + i);
  }
  EXPECT_EQ(ch->Stats().max_depth, 2u);
}

TEST(ChannelTest, ConsumerWaitsForMinReady) {
  auto ch = Make<int>(8, /*min_ready=*/3);
  ASSERT_TRUE(ch->Push(10).ok());
  ASSERT_TRUE(ch->Push(11).ok());
  EXPECT_EQ(ch->PopFor(20ms).status().code(), StatusCode::kDeadlineExceeded)
      << "2 queued < min_ready 3: nothing may be taken";
  std::atomic<bool> got{false};
  int value = -1;
  std::thread consumer([&] {
    auto r = ch->Pop();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    value = *r;
    got = true;
  });
  WaitUntil([&] { return ch->Stats().blocked_consumers == 1; });  // waits below min_ready
  EXPECT_FALSE(got.load());
  EXPECT_EQ(ch->Stats().depth, 2u);
  ASSERT_TRUE(ch->Push(12).ok());
  consumer.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(value, 10);  // FIFO: the oldest item
  // 2 left, below min_ready again.
  EXPECT_EQ(ch->TryPop().status().code(), StatusCode::kDeadlineExceeded);
}

TEST(ChannelTest, PopBatchHonorsMinReadyAndMax) {
  auto ch = Make<int>(8, /*min_ready=*/2);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ch->Push(int{i}).ok());
  auto a = ch->PopBatch(3, kWaitForever);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<int>{0, 1, 2}));
  auto b = ch->PopBatch(3, 10ms);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{3, 4}));
  ASSERT_TRUE(ch->Push(5).ok());
  EXPECT_EQ(ch->PopBatch(3, 10ms).status().code(), StatusCode::kDeadlineExceeded);
  // An explicit min_ready overrides the channel's.
  auto c = ch->PopBatch(/*min_ready=*/1, /*max=*/4, 10ms);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<int>{5}));
  EXPECT_EQ(ch->Stats().total_popped, 6u);
}

TEST(ChannelTest, CloseWakesProducersAndConsumersDrain) {
  auto ch = Make<int>(2, /*min_ready=*/2);
  ASSERT_TRUE(ch->Push(1).ok());
  ASSERT_TRUE(ch->Push(2).ok());
  Status blocked_push;
  std::thread producer([&] { blocked_push = ch->Push(3); });
  WaitUntil([&] { return ch->Stats().blocked_producers == 1; });
  ch->Close();
  producer.join();
  EXPECT_EQ(blocked_push.code(), StatusCode::kUnavailable);
  EXPECT_EQ(ch->Push(4).code(), StatusCode::kUnavailable);
  // Drain: 2 items, then one below min_ready, then closed.
  EXPECT_EQ(*ch->Pop(), 1);
  EXPECT_EQ(*ch->Pop(), 2) << "closed channels drain regardless of min_ready";
  EXPECT_EQ(ch->Pop().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(ch->PopBatch(1, 4, 10ms).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(ch->Stats().closed);
}

TEST(ChannelTest, CloseWakesBlockedConsumer) {
  auto ch = Make<int>(4, /*min_ready=*/3);
  ASSERT_TRUE(ch->Push(7).ok());
  Result<std::vector<int>> got = UnavailableError("not run");
  std::thread consumer([&] { got = ch->PopBatch(4, kWaitForever); });
  WaitUntil([&] { return ch->Stats().blocked_consumers == 1; });
  ch->Close();
  consumer.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, std::vector<int>{7});
}

TEST(ChannelTest, TimedOpsWaitTheirTimeout) {
  auto ch = Make<int>(1);
  auto t0 = SteadyClock::now();
  EXPECT_EQ(ch->PopFor(50ms).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(SteadyClock::now() - t0, 50ms);
  ASSERT_TRUE(ch->Push(1).ok());
  t0 = SteadyClock::now();
  EXPECT_EQ(ch->PushFor(2, 50ms).code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(SteadyClock::now() - t0, 50ms);
  // A timed push that gets room in time succeeds.
  std::thread consumer([&] {
    WaitUntil([&] { return ch->Stats().blocked_producers == 1; });  // the push waits first
    EXPECT_EQ(*ch->Pop(), 1);
  });
  EXPECT_TRUE(ch->PushFor(3, 10s).ok());
  consumer.join();
  EXPECT_EQ(*ch->Pop(), 3);
}

TEST(ChannelTest, StatsMeasureWhoWaits) {
  // Waits are measured on a clock the test steps, so the numbers are exact however loaded
  // the machine is (the waits themselves are real: the threads block until woken).
  ManualClock clock;
  auto ch = *Channel<int>::Create("test", {.capacity = 1, .min_ready = 1}, clock);
  // A consumer waits 80 ms (of the manual clock) for a producer.
  std::thread consumer([&] { EXPECT_EQ(*ch->Pop(), 1); });
  WaitUntil([&] { return ch->Stats().blocked_consumers == 1; });
  clock.Advance(80ms);
  ASSERT_TRUE(ch->Push(1).ok());
  consumer.join();
  ChannelStats s = ch->Stats();
  EXPECT_EQ(s.pop_waits, 1u);
  EXPECT_EQ(s.pop_wait_total_ns, 80'000'000);
  // First call into a fresh average: recent = wait / 8.
  EXPECT_DOUBLE_EQ(s.recent_pop_wait_ns, s.pop_wait_total_ns / 8.0);
  EXPECT_EQ(s.push_waits, 0u);
  EXPECT_EQ(s.push_wait_total_ns, 0);

  // Now a producer waits 30 ms on a full channel.
  ASSERT_TRUE(ch->Push(2).ok());
  std::thread producer([&] { EXPECT_TRUE(ch->Push(3).ok()); });
  WaitUntil([&] { return ch->Stats().blocked_producers == 1; });
  clock.Advance(30ms);
  EXPECT_EQ(*ch->Pop(), 2);
  producer.join();
  s = ch->Stats();
  EXPECT_EQ(s.push_waits, 1u);
  EXPECT_EQ(s.push_wait_total_ns, 30'000'000);
  EXPECT_DOUBLE_EQ(s.recent_push_wait_ns, 30'000'000 / 8.0);
  EXPECT_EQ(s.pop_wait_total_ns, 80'000'000) << "the producer's wait is not the consumers'";
  EXPECT_EQ(s.total_pushed, 3u);
  EXPECT_EQ(s.total_popped, 2u);
  EXPECT_EQ(s.depth, 1u);
  EXPECT_EQ(s.blocked_producers, 0);
  // A call that does not block decays the recent average by 1/8.
  const double before = s.recent_pop_wait_ns;
  EXPECT_EQ(*ch->Pop(), 3);
  EXPECT_DOUBLE_EQ(ch->Stats().recent_pop_wait_ns, before * 7 / 8);
}

TEST(ChannelTest, ManyProducersManyConsumersDeliverEachItemOnce) {
  constexpr int kProducers = 4, kConsumers = 4, kPerProducer = 5000;
  auto ch = Make<int>(8, /*min_ready=*/2);
  std::vector<std::atomic<int>> seen(kProducers * kPerProducer);
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) ASSERT_TRUE(ch->Push(p * kPerProducer + i).ok());
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      while (true) {
        if (c % 2 == 0) {
          auto r = ch->Pop();
          if (!r.ok()) break;
          seen[*r]++;
        } else {
          auto r = ch->PopBatch(3, kWaitForever);
          if (!r.ok()) break;
          for (int v : *r) seen[v]++;
        }
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) threads[p].join();
  ch->Close();
  for (size_t i = kProducers; i < threads.size(); ++i) threads[i].join();
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "item " << i;
  ChannelStats s = ch->Stats();
  EXPECT_EQ(s.total_pushed, uint64_t{kProducers * kPerProducer});
  EXPECT_EQ(s.total_popped, s.total_pushed);
  EXPECT_LE(s.max_depth, 8u);
}

TEST(ChannelTest, HooksTrackItemsHeldByChannel) {
  g_tracked_in_channel = 0;
  {
    auto ch = Make<Tracked>(2);
    ASSERT_TRUE(ch->Push(Tracked{1}).ok());
    ASSERT_TRUE(ch->Push(Tracked{2}).ok());
    EXPECT_EQ(g_tracked_in_channel.load(), 2);
    EXPECT_FALSE(ch->TryPush(Tracked{3}).ok());
    EXPECT_EQ(g_tracked_in_channel.load(), 2) << "a refused item never entered";
    Tracked t = *ch->Pop();
    EXPECT_EQ(t.value, 1);
    EXPECT_FALSE(t.in_channel);
    EXPECT_EQ(g_tracked_in_channel.load(), 1);
  }
  EXPECT_EQ(g_tracked_in_channel.load(), 0) << "items destroyed with the channel leave it";
}

}  // namespace
}  // namespace tandem
