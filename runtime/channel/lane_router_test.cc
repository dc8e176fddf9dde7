// LaneRouter's arithmetic, single-threaded: destinations, consumer order, windows, void
// positions of finished producers.
#include "runtime/channel/lane_router.h"

#include <gtest/gtest.h>

#include <vector>

namespace tandem {
namespace {

// The consumers of producer p's first n items, pushing each as it goes.
std::vector<int> Destinations(LaneRouter& r, int p, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(r.Destination(p));
    r.Pushed(p);
  }
  return out;
}

TEST(LaneRouterTest, DestinationIsGlobalIndexModConsumers) {
  LaneRouter one_two(1, 2, 8);
  EXPECT_EQ(Destinations(one_two, 0, 5), (std::vector<int>{0, 1, 0, 1, 0}));
  LaneRouter two_two(2, 2, 8);
  EXPECT_EQ(Destinations(two_two, 0, 3), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(Destinations(two_two, 1, 3), (std::vector<int>{1, 1, 1}));
  EXPECT_FALSE(two_two.Feeds(0, 1));
  EXPECT_FALSE(two_two.Feeds(1, 0));
  LaneRouter three_two(3, 2, 8);                                             // g = 3s + p
  EXPECT_EQ(Destinations(three_two, 0, 4), (std::vector<int>{0, 1, 0, 1}));  // g 0 3 6 9
  EXPECT_EQ(Destinations(three_two, 1, 4), (std::vector<int>{1, 0, 1, 0}));  // g 1 4 7 10
}

TEST(LaneRouterTest, SharesSplitTheCapacity) {
  LaneRouter r(2, 3, 8);
  EXPECT_EQ(r.Share(0), 3u);
  EXPECT_EQ(r.Share(1), 3u);
  EXPECT_EQ(r.Share(2), 2u);
}

TEST(LaneRouterTest, ConsumerTakesInGlobalOrderAndWaitsForTheMissingOne) {
  LaneRouter r(2, 1, 4);
  r.Pushed(1);  // g = 1
  EXPECT_EQ(r.Ready(0, 10), 0u) << "g = 0 (producer 0) comes first";
  r.Pushed(0);  // g = 0
  EXPECT_EQ(r.Ready(0, 10), 2u);
  EXPECT_EQ(r.Take(0), 0);
  EXPECT_EQ(r.Take(0), 1);
  EXPECT_EQ(r.Ready(0, 10), 0u);
}

TEST(LaneRouterTest, WindowReservesRoomForTheItemTheConsumerWaitsFor) {
  LaneRouter r(2, 1, 2);  // one consumer, share 2
  ASSERT_TRUE(r.Admits(1));
  r.Pushed(1);  // g = 1
  // g = 3 is two positions (0 pending, 1 held) past the cursor: outside the window.
  EXPECT_FALSE(r.Admits(1));
  EXPECT_TRUE(r.Admits(0)) << "g = 0 is at the cursor";
  r.Pushed(0);
  EXPECT_FALSE(r.Admits(0));  // g = 2: window {0, 1} is full
  EXPECT_EQ(r.Take(0), 0);
  EXPECT_TRUE(r.Admits(0));   // window {1, 2}
  EXPECT_FALSE(r.Admits(1));  // g = 3
}

TEST(LaneRouterTest, FinishedProducerPositionsAreSkipped) {
  LaneRouter r(3, 1, 3);
  r.Pushed(0);  // g = 0
  r.Finish(1);  // g = 1, 4, ... void
  r.Pushed(2);  // g = 2
  EXPECT_EQ(r.Ready(0, 10), 2u);
  EXPECT_EQ(r.Take(0), 0);
  EXPECT_EQ(r.Take(0), 2);
  EXPECT_FALSE(r.Exhausted(0));
  EXPECT_EQ(r.Ready(0, 10), 0u);  // g = 3 (producer 0) pending
  r.Finish(0);
  r.Finish(2);
  EXPECT_TRUE(r.Exhausted(0));
  EXPECT_EQ(r.Ready(0, 10), 0u);
}

TEST(LaneRouterTest, VoidPositionsTakeNoRoomInTheWindow) {
  LaneRouter r(2, 1, 1);
  r.Finish(0);
  EXPECT_TRUE(r.Admits(1));  // g = 1; g = 0 is void
  r.Pushed(1);
  EXPECT_FALSE(r.Admits(1));  // g = 3; g = 1 held, share 1
  EXPECT_EQ(r.Take(0), 1);
  EXPECT_TRUE(r.Admits(1));
}

TEST(LaneRouterTest, ExhaustedOnlyWhenEveryFeederFinished) {
  LaneRouter r(2, 2, 4);  // producer p feeds consumer p only
  r.Finish(0);
  EXPECT_TRUE(r.Exhausted(0));
  EXPECT_FALSE(r.Exhausted(1));
}

}  // namespace
}  // namespace tandem
