#include "runtime/channel/ref_channel.h"

#include <memory>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/store/object_store.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;

struct LayerBatch {
  std::vector<ObjectRef> layers;
  int step = 0;
  template <class F>
  void ForEachRef(F&& f) {
    for (ObjectRef& r : layers) f(r);
  }
};

class RefChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.capacity_bytes = 1 << 20;
    o.backing = ArenaBacking::kHostPages;
    o.reaper_interval = Duration::zero();
    auto store = ObjectStore::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  // Every object must be gone once the test's refs and channels are: nothing leaks
  // through a channel.
  void TearDown() override {
    StoreStats s = store_->Stats();
    EXPECT_EQ(s.live_objects, 0u) << s.ToString();
    EXPECT_EQ(s.bytes_used, 0u) << s.ToString();
  }
  ObjectRef Put(uint8_t value) {
    auto obj = store_->Create(64, "test", 0ms);
    TANDEM_CHECK_OK(obj.status());
    obj->data()[0] = value;
    return obj->Seal();
  }

  std::unique_ptr<ObjectStore> store_;
};

// Route "replica": refs in any lane count as channel holdings, and refs left in lanes are
// released with the channel.
TEST_F(RefChannelTest, RefsInReplicaLanesCountAsChannelHoldings) {
  auto ch = Channel<LayerBatch>::Create("hidden", {.capacity = 4,
                                                   .min_ready = 1,
                                                   .route = ChannelRoute::kReplica,
                                                   .producers = 2,
                                                   .consumers = 2});
  ASSERT_TRUE(ch.ok());
  for (int p = 0; p < 2; ++p) {
    LayerBatch b{{Put(static_cast<uint8_t>(p)), Put(9)}, p};
    ASSERT_TRUE((*ch)->PushFrom(p, std::move(b)).ok());
  }
  EXPECT_EQ(store_->Stats().channel.refs, 4u);
  auto got = (*ch)->PopAs(1);  // producer 1 feeds consumer 1
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->step, 1);
  EXPECT_EQ(got->layers[0].holder(), HolderKind::kLocal);
  EXPECT_EQ(store_->Stats().channel.refs, 2u);
  EXPECT_EQ(store_->Stats().local.refs, 2u);
  ch->reset();  // producer 0's batch is still in its lane
  EXPECT_EQ(store_->Stats().channel.refs, 0u);
}

TEST_F(RefChannelTest, RefsInChannelCountAsChannelHoldings) {
  auto ch = Channel<ObjectRef>::Create("hidden", {.capacity = 4, .min_ready = 1});
  ASSERT_TRUE(ch.ok());
  ObjectRef a = Put(1);
  ObjectRef keep = a;  // a second, local reference to the same object
  ASSERT_TRUE((*ch)->Push(std::move(a)).ok());
  EXPECT_EQ(keep.counts().local, 1u);
  EXPECT_EQ(keep.counts().channel, 1u);
  EXPECT_EQ(store_->Stats().channel.refs, 1u);
  EXPECT_EQ(store_->Stats().local.refs, 1u);

  ObjectRef out = *(*ch)->Pop();
  EXPECT_EQ(out.holder(), HolderKind::kLocal);
  EXPECT_EQ(out.counts().local, 2u);
  EXPECT_EQ(out.counts().channel, 0u);
  EXPECT_EQ(out.data()[0], 1);
  EXPECT_EQ(store_->Stats().channel.refs, 0u);
}

TEST_F(RefChannelTest, RefusedPushStaysLocal) {
  auto ch = Channel<ObjectRef>::Create("full", {.capacity = 1, .min_ready = 1});
  ASSERT_TRUE(ch.ok());
  ASSERT_TRUE((*ch)->Push(Put(1)).ok());
  ObjectRef b = Put(2);
  EXPECT_FALSE((*ch)->TryPush(std::move(b)).ok());
  ASSERT_TRUE(b);
  EXPECT_EQ(b.holder(), HolderKind::kLocal);
  EXPECT_EQ(b.counts().channel, 0u);
  EXPECT_EQ(store_->Stats().channel.refs, 1u);
}

TEST_F(RefChannelTest, ChannelDestroyedWithRefsReleasesThem) {
  {
    auto ch = Channel<ObjectRef>::Create("dropped", {.capacity = 4, .min_ready = 1});
    ASSERT_TRUE(ch.ok());
    for (uint8_t i = 0; i < 3; ++i) ASSERT_TRUE((*ch)->Push(Put(i)).ok());
    EXPECT_EQ(store_->Stats().live_objects, 3u);
    EXPECT_EQ(store_->Stats().channel.refs, 3u);
  }
  // TearDown checks the objects are freed.
}

TEST_F(RefChannelTest, StructWithSeveralRefs) {
  auto ch = Channel<LayerBatch>::Create("batches", {.capacity = 2, .min_ready = 1});
  ASSERT_TRUE(ch.ok());
  LayerBatch batch{{Put(1), Put(2), Put(3)}, 7};
  ASSERT_TRUE((*ch)->Push(std::move(batch)).ok());
  EXPECT_EQ(store_->Stats().channel.refs, 3u);
  EXPECT_EQ(store_->Stats().local.refs, 0u);
  LayerBatch got = *(*ch)->Pop();
  EXPECT_EQ(got.step, 7);
  for (const ObjectRef& r : got.layers) EXPECT_EQ(r.holder(), HolderKind::kLocal);
  EXPECT_EQ(store_->Stats().channel.refs, 0u);
  EXPECT_EQ(store_->Stats().local.refs, 3u);
}

}  // namespace
}  // namespace tandem
