#include "runtime/store/object_store.h"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/store/store_test_fixture.h"

namespace tandem {
namespace {

// Blocks until `n` creates have started waiting for memory (no sleep: a create counts its
// wait under the store's lock and only then waits, so the count is the event itself).
void WaitForCreateWaits(const ObjectStore& store, uint64_t n) {
  const TimePoint deadline = SteadyClock::now() + std::chrono::seconds(20);
  while (store.Stats().create_waits < n) {
    ASSERT_LT(SteadyClock::now(), deadline) << "no create started waiting";
    std::this_thread::yield();
  }
}

using std::chrono::milliseconds;

constexpr uint64_t kObj = 4096;

void Fill(uint8_t* p, uint64_t n, uint8_t seed) {
  for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

StoreOptions SmallStore() {
  StoreOptions o;
  o.capacity_bytes = 1 << 20;
  return o;
}

bool Overlaps(const uint8_t* a, const uint8_t* b, uint64_t n) { return a < b + n && b < a + n; }

ObjectRef Put(ObjectStore& store, uint64_t bytes, std::string_view owner, uint8_t seed) {
  Result<MutableObject> obj = store.Create(bytes, owner, milliseconds(0));
  TANDEM_CHECK_MSG(obj.ok(), "{}", obj.status().ToString());
  Fill(obj->data(), bytes, seed);
  return obj->Seal();
}

TEST_F(StoreTest, CreateSealReadAndCountsByHolderKind) {
  StoreOptions o;
  o.capacity_bytes = 16 * kObj;
  o.node_id = 3;
  o.store_id = 7;
  OpenStore(o);
  ObjectRef a = Put(*store_, 1000, "target", 5);
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_EQ(a.owner(), "target");
  EXPECT_EQ(a.id().node_id, 3u);
  EXPECT_EQ(a.id().store_id, 7u);
  EXPECT_NE(a.id().object_id, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 256, 0u);
  EXPECT_EQ(a.data()[999], static_cast<uint8_t>(5 + 999 * 7));

  ObjectRef b = a;  // a copy is a new local ref
  EXPECT_EQ(a.counts().local, 2u);
  b.SetHolder(HolderKind::kChannel);
  EXPECT_EQ(a.counts().local, 1u);
  EXPECT_EQ(a.counts().channel, 1u);
  ObjectRef c = std::move(b);  // a move keeps the count and the holder kind
  EXPECT_FALSE(b);
  EXPECT_EQ(c.holder(), HolderKind::kChannel);
  EXPECT_EQ(a.counts().total(), 2u);

  StoreStats s = store_->Stats();
  EXPECT_EQ(s.live_objects, 1u);
  EXPECT_EQ(s.bytes_used, 1024u);  // 1000 rounded up to the 256-byte alignment
  EXPECT_EQ(s.local.refs, 1u);
  EXPECT_EQ(s.channel.refs, 1u);
  EXPECT_EQ(s.channel.bytes, 1024u);
  ASSERT_EQ(s.owners.size(), 1u);
  EXPECT_EQ(s.owners[0].channel_refs, 1u);
  EXPECT_NE(s.ToString().find("owner 'target'"), std::string::npos);

  a.Reset();
  EXPECT_EQ(store_->Stats().live_objects, 1u);  // c still holds it
  c.SetHolder(HolderKind::kLocal);
  c.Reset();
  s = store_->Stats();
  EXPECT_EQ(s.live_objects, 0u);
  EXPECT_EQ(s.high_water, 1024u);
  EXPECT_EQ(s.creates, 1u);
  EXPECT_EQ(s.frees, 1u);
}

TEST_F(StoreTest, UnsealedObjectIsDiscardedWhenDropped) {
  OpenStore(SmallStore());
  {
    Result<MutableObject> obj = store_->Create(100, "w");
    ASSERT_TRUE(obj.ok());
    EXPECT_EQ(store_->Stats().owners.at(0).unsealed, 1u);
  }
  EXPECT_EQ(store_->Stats().live_objects, 0u);
}

// The store invariant on the CPU: the last user ref is dropped while a copy still reads the
// object. The arena has room for exactly two objects, so if the in-flight object's range were
// freed, the second Create below would get it.
TEST_F(StoreTest, InflightCopyKeepsObjectUntilFenceCompletes) {
  StoreOptions o;
  o.capacity_bytes = 2 * kObj;
  OpenStore(o);  // the reaper runs every 1 ms and must not free the object either
  ObjectRef a = Put(*store_, kObj, "target", 11);
  const uint8_t* a_range = a.data();
  uint8_t* dst = Scratch(kObj);
  Result<std::shared_ptr<const CopyFence>> fence =
      store_->CopyOut(a, 0, dst, kObj, engine_);
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  a.Reset();  // the last user reference

  StoreStats s = store_->Stats();
  EXPECT_EQ(s.live_objects, 1u);
  EXPECT_EQ(s.inflight_copies, 1u);
  EXPECT_EQ(s.inflight.refs, 1u);
  for (int round = 0; round < 50; ++round) {
    EXPECT_EQ(store_->PollFences(), 0u);
    ObjectRef b = Put(*store_, kObj, "drafter", 0xEE);
    EXPECT_FALSE(Overlaps(b.data(), a_range, kObj)) << "round " << round;
    Result<MutableObject> c = store_->Create(kObj, "drafter", milliseconds(0));
    ASSERT_FALSE(c.ok()) << "the in-flight object's range was handed out in round " << round;
    EXPECT_EQ(c.status().code(), StatusCode::kOutOfMemory);
    EXPECT_NE(c.status().message().find("'target': 1 objects"), std::string::npos)
        << c.status().message();
    EXPECT_NE(c.status().message().find("in-flight copies 1"), std::string::npos);
    // Let the reaper poll before the next round: wait for its count to move (it polls
    // every 1 ms while a copy is pending), instead of sleeping and hoping it ran.
    const uint64_t polls = store_->Stats().reaper_polls;
    const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (store_->Stats().reaper_polls == polls) {
      ASSERT_LT(SteadyClock::now(), deadline) << "the reaper stopped polling";
      std::this_thread::yield();
    }
  }
  EXPECT_GE(store_->Stats().reaper_polls, 50u);
  EXPECT_FALSE((*fence)->IsComplete());
  ASSERT_TRUE(engine_.CompleteOldest());  // the copy reads the source bytes only now
  for (uint64_t i = 0; i < kObj; ++i)
    ASSERT_EQ(dst[i], static_cast<uint8_t>(11 + i * 7)) << "byte " << i;
  EXPECT_TRUE((*fence)->IsComplete());
  store_->PollFences();
  EXPECT_EQ(store_->Stats().live_objects, 0u);
  ObjectRef x = Put(*store_, kObj, "drafter", 1);
  ObjectRef y = Put(*store_, kObj, "drafter", 2);
  EXPECT_TRUE(Overlaps(x.data(), a_range, kObj) || Overlaps(y.data(), a_range, kObj));
}

TEST_F(StoreTest, CopyIntoKeepsDiscardedObjectUntilFenceCompletes) {
  StoreOptions o;
  o.capacity_bytes = kObj;
  o.reaper_interval = Duration::zero();  // only explicit polls free
  OpenStore(o);
  std::vector<uint8_t> src(kObj);
  Fill(src.data(), kObj, 3);
  {
    Result<MutableObject> obj = store_->Create(kObj, "target");
    ASSERT_TRUE(obj.ok());
    ASSERT_TRUE(store_->CopyInto(*obj, 0, src.data(), kObj, engine_).ok());
  }  // discarded unsealed while the copy still writes into it
  EXPECT_EQ(store_->PollFences(), 0u);
  EXPECT_FALSE(store_->Create(1, "other", milliseconds(0)).ok());
  engine_.CompleteAll();
  {
    Result<MutableObject> again = store_->Create(kObj, "other", milliseconds(0));
    EXPECT_TRUE(again.ok()) << again.status().ToString();  // the failed attempt polled fences
  }
  // Sealing after the write completes gives the written bytes.
  Result<MutableObject> obj = store_->Create(kObj, "target");
  ASSERT_TRUE(obj.ok());
  Result<std::shared_ptr<const CopyFence>> f = store_->CopyInto(*obj, 0, src.data(), kObj, engine_);
  ASSERT_TRUE(f.ok());
  engine_.CompleteAll();
  ASSERT_TRUE((*f)->Wait(milliseconds(100)).ok());
  ObjectRef r = obj->Seal();
  EXPECT_EQ(std::memcmp(r.data(), src.data(), kObj), 0);
}

TEST_F(StoreTest, CopyRejectsBadRanges) {
  OpenStore(SmallStore());
  ObjectRef a = Put(*store_, 100, "t", 0);
  uint8_t* dst = Scratch(128);
  EXPECT_EQ(store_->CopyOut(a, 50, dst, 51, engine_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CopyOut(ObjectRef(), 0, dst, 1, engine_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->CopyOut(a, 50, dst, 50, engine_).ok());
  EXPECT_EQ(engine_.pending(), 1u);
  engine_.CompleteAll();
  EXPECT_EQ(dst[0], a.data()[50]);
}

TEST_F(StoreTest, RequestLargerThanArenaFailsAtOnce) {
  StoreOptions o;
  o.capacity_bytes = 8 * kObj;
  OpenStore(o);
  TimePoint start = SteadyClock::now();
  Result<MutableObject> obj = store_->Create(8 * kObj + 1, "big", std::chrono::seconds(10));
  EXPECT_LT(SecondsSince(start), 1.0);  // no waiting for memory that can never exist
  ASSERT_FALSE(obj.ok());
  EXPECT_EQ(obj.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(obj.status().message().find("larger than the whole store"), std::string::npos);
  EXPECT_TRUE(store_->Create(8 * kObj, "big", milliseconds(0)).ok());  // exactly fits
}

TEST_F(StoreTest, BlockedCreateWakesWhenARefIsReleased) {
  StoreOptions o;
  o.capacity_bytes = 2 * kObj;
  o.reaper_interval = Duration::zero();
  OpenStore(o);
  ObjectRef a = Put(*store_, kObj, "target", 1);
  ObjectRef b = Put(*store_, kObj, "target", 2);
  std::atomic<bool> done{false};
  Status result;
  std::thread waiter([&] {
    Result<MutableObject> c = store_->Create(kObj, "drafter", std::chrono::seconds(20));
    result = c.status();
    done = true;
  });
  WaitForCreateWaits(*store_, 1);  // counted under the lock it then waits on
  EXPECT_FALSE(done.load());  // it waits: the arena is full
  a.Reset();
  waiter.join();  // must wake well before its 20 s timeout
  EXPECT_TRUE(result.ok()) << result.ToString();
  StoreStats s = store_->Stats();
  EXPECT_EQ(s.create_waits, 1u);
  EXPECT_EQ(s.create_timeouts, 0u);
}

TEST_F(StoreTest, BlockedCreateWakesWhenAFenceCompletes) {
  StoreOptions o;
  o.capacity_bytes = kObj;
  OpenStore(o);  // the reaper notices the fence
  uint8_t* dst = Scratch(kObj);
  {
    ObjectRef a = Put(*store_, kObj, "target", 1);
    ASSERT_TRUE(store_->CopyOut(a, 0, dst, kObj, engine_).ok());
  }
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    EXPECT_TRUE(store_->Create(kObj, "drafter", std::chrono::seconds(20)).ok());
    done = true;
  });
  WaitForCreateWaits(*store_, 1);
  EXPECT_FALSE(done.load());
  engine_.CompleteAll();
  waiter.join();
  EXPECT_TRUE(done.load());
}

TEST_F(StoreTest, TimeoutErrorNamesTheHolders) {
  StoreOptions o;
  o.name = "hidden-store";
  o.capacity_bytes = 3 * kObj;
  OpenStore(o);
  ObjectRef in_channel = Put(*store_, kObj, "target", 1);
  in_channel.SetHolder(HolderKind::kChannel);
  ObjectRef local = Put(*store_, kObj, "target", 2);
  uint8_t* dst = Scratch(kObj);
  {
    ObjectRef copied = Put(*store_, kObj, "packer", 3);
    ASSERT_TRUE(store_->CopyOut(copied, 0, dst, kObj, engine_).ok());
  }
  TimePoint start = SteadyClock::now();
  Result<MutableObject> obj = store_->Create(kObj, "drafter", milliseconds(50));
  EXPECT_GE(SecondsSince(start), 0.05);
  ASSERT_FALSE(obj.ok());
  const std::string& m = obj.status().message();
  EXPECT_EQ(obj.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(m.find("store 'hidden-store'"), std::string::npos) << m;
  EXPECT_NE(m.find("for 'drafter'"), std::string::npos) << m;
  EXPECT_NE(m.find("'target': 2 objects, 8.0 KiB (local refs 1, channel refs 1, in-flight "
                   "copies 0"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("'packer': 1 objects, 4.0 KiB (local refs 0, channel refs 0, in-flight "
                   "copies 1"),
            std::string::npos)
      << m;
  EXPECT_EQ(store_->Stats().create_timeouts, 1u);
}

TEST_F(StoreTest, CustomAlignment) {
  StoreOptions o;
  o.alignment = 4096;
  o.capacity_bytes = 16 * 4096;
  OpenStore(o);
  ObjectRef a = Put(*store_, 1, "t", 0);
  ObjectRef b = Put(*store_, 1, "t", 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  EXPECT_EQ(store_->Stats().bytes_used, 2 * 4096u);
}

TEST(StoreOpenTest, RejectsBadOptions) {
  StoreOptions o;
  o.alignment = 100;
  EXPECT_EQ(ObjectStore::Open(o).status().code(), StatusCode::kInvalidArgument);
  o.alignment = 256;
  o.capacity_bytes = 10;
  EXPECT_EQ(ObjectStore::Open(o).status().code(), StatusCode::kInvalidArgument);
}

// The tear-down check itself must catch a leak.
TEST(StoreLeakCheckTest, DetectsLiveObjects) {
  StoreOptions o = SmallStore();
  o.backing = ArenaBacking::kHostPages;
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok());
  ObjectRef a = Put(**store, 10, "leaker", 0);
  Status s = CheckNoLeaks(**store);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("leaker"), std::string::npos) << s.message();
  a.Reset();
  EXPECT_TRUE(CheckNoLeaks(**store).ok());
}

}  // namespace
}  // namespace tandem
