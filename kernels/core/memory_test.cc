// CPU tests of kernels/core/memory.h: Tensor ownership, the host allocator, and the caching
// pool's bookkeeping (reuse, splitting, coalescing, streams, OOM) against a fake backend.
#include "kernels/core/memory.h"
#include "kernels/core/pinned_allocator.h"

#include <gtest/gtest.h>

#include "kernels/testing/fake_device_memory.h"

namespace tandem::kernels {
namespace {

using testing::FakeDeviceMemory;

// Streams are opaque keys to the pool; these never reach CUDA.
Stream FakeStream(int i) { return reinterpret_cast<Stream>(static_cast<intptr_t>(0x1000 * i)); }

TEST(TensorTest, HostTensorOwnsAlignedMemoryAndFreesOnDestruction) {
  CpuAllocator alloc;
  {
    Result<Tensor> t = Tensor::Zeros(alloc, DType::kBF16, {3, 5});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->nbytes(), 30);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 4096, 0u);
    EXPECT_EQ(t->view().ToString(), "bf16[3, 5] cpu");
    for (int i = 0; i < 30; ++i) EXPECT_EQ(static_cast<char*>(t->data())[i], 0);
    EXPECT_EQ(alloc.stats().in_use_bytes, 4096);
    Tensor moved = std::move(t).value();
    EXPECT_FALSE(moved.empty());
    Tensor other;
    other = std::move(moved);
    EXPECT_TRUE(moved.empty());  // NOLINT: testing moved-from state
    EXPECT_EQ(alloc.stats().in_use_bytes, 4096);
  }
  EXPECT_EQ(alloc.stats().in_use_bytes, 0);
  EXPECT_EQ(alloc.stats().high_water_in_use, 4096);
}

TEST(TensorTest, NegativeShapeIsAnError) {
  Result<Tensor> t = Tensor::Empty(HostAllocator(), DType::kF32, {2, -1});
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorTest, CopyBetweenHostTensors) {
  CpuAllocator alloc;
  Tensor a = Tensor::Empty(alloc, DType::kF32, {4}).value();
  Tensor b = Tensor::Empty(alloc, DType::kF32, {2, 2}).value();
  float src[4] = {1, 2, 3, 4}, dst[4] = {};
  ASSERT_TRUE(CopyFromHost(a, src, nullptr).ok());
  ASSERT_TRUE(Copy(b, a, nullptr).ok());
  ASSERT_TRUE(CopyToHost(dst, b, nullptr).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(dst[i], src[i]);
  Tensor c = Tensor::Empty(alloc, DType::kF32, {3}).value();
  EXPECT_EQ(Copy(c, a, nullptr).code(), StatusCode::kInvalidArgument);
}

class CachingPoolTest : public ::testing::Test {
 protected:
  FakeDeviceMemory::State fake_;
  CachingPool pool_{std::make_unique<FakeDeviceMemory>(&fake_)};
};

TEST_F(CachingPoolTest, SteadyStateStepNeverCallsTheBackend) {
  const std::vector<int64_t> sizes = {100, 4096, 3 << 20, 12345, 64 << 20, 7, 1 << 20};
  for (int step = 0; step < 5; ++step) {
    std::vector<Tensor> live;
    for (int64_t n : sizes)
      live.push_back(Tensor::Empty(pool_, DType::kU8, {n}, FakeStream(1)).value());
    live.erase(live.begin() + 2);  // free some mid-step, like activations
    live.push_back(Tensor::Empty(pool_, DType::kU8, {5 << 20}, FakeStream(1)).value());
    if (step == 0) continue;
    EXPECT_EQ(pool_.stats().num_backend_allocs, fake_.mallocs);
  }
  int after_warmup = fake_.mallocs;
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> live;
    for (int64_t n : sizes)
      live.push_back(Tensor::Empty(pool_, DType::kU8, {n}, FakeStream(1)).value());
  }
  EXPECT_EQ(fake_.mallocs, after_warmup);
  EXPECT_EQ(pool_.stats().in_use_bytes, 0);
  EXPECT_GT(pool_.stats().cached_bytes, 0);
}

TEST_F(CachingPoolTest, ReserveServesSplitBlocksAndCoalescesThemBack) {
  ASSERT_TRUE(pool_.Reserve(16 << 20, FakeStream(1)).ok());
  EXPECT_EQ(fake_.mallocs, 1);
  {
    std::vector<Tensor> ts;
    for (int i = 0; i < 8; ++i)
      ts.push_back(Tensor::Empty(pool_, DType::kU8, {2 << 20}, FakeStream(1)).value());
    EXPECT_EQ(fake_.mallocs, 1);  // all eight carved from the reservation
    EXPECT_EQ(pool_.stats().in_use_bytes, 16 << 20);
    EXPECT_EQ(pool_.stats().cached_bytes, 0);
    // Free every other block first so coalescing has to join both neighbours.
    for (int i = 0; i < 8; i += 2) ts[i].Reset();
  }
  Tensor whole = Tensor::Empty(pool_, DType::kU8, {16 << 20}, FakeStream(1)).value();
  EXPECT_EQ(fake_.mallocs, 1);
  EXPECT_EQ(pool_.stats().high_water_in_use, 16 << 20);
}

TEST_F(CachingPoolTest, BlocksFreedOnOneStreamAreNotHandedToAnother) {
  void* a = Tensor::Empty(pool_, DType::kU8, {1 << 20}, FakeStream(1)).value().data();
  Tensor b = Tensor::Empty(pool_, DType::kU8, {1 << 20}, FakeStream(2)).value();
  EXPECT_NE(b.data(), a);
  EXPECT_EQ(fake_.mallocs, 2);
  Tensor c = Tensor::Empty(pool_, DType::kU8, {1 << 20}, FakeStream(1)).value();
  EXPECT_EQ(c.data(), a);  // same stream: reused at once
}

TEST_F(CachingPoolTest, RecordedStreamHoldsTheBlockUntilItsWorkCompletes) {
  void* p;
  {
    Tensor t = Tensor::Empty(pool_, DType::kU8, {4 << 20}, FakeStream(1)).value();
    p = t.data();
    t.RecordStream(FakeStream(2));  // e.g. a copy stream reads it
  }
  EXPECT_EQ(fake_.pending_markers.size(), 1u);
  Tensor t2 = Tensor::Empty(pool_, DType::kU8, {4 << 20}, FakeStream(1)).value();
  EXPECT_NE(t2.data(), p) << "reused while stream 2 may still read it";
  t2.Reset();
  fake_.CompleteStream(FakeStream(2));
  Tensor t3 = Tensor::Empty(pool_, DType::kU8, {4 << 20}, FakeStream(1)).value();
  EXPECT_TRUE(t3.data() == p || t3.data() == t2.data());
  EXPECT_EQ(fake_.mallocs, 2);
}

TEST_F(CachingPoolTest, OutOfMemoryReleasesCacheThenFailsClearly) {
  fake_.capacity = 64 << 20;
  { Tensor a = Tensor::Empty(pool_, DType::kU8, {40 << 20}, FakeStream(1)).value(); }
  EXPECT_EQ(pool_.stats().cached_bytes, 40 << 20);
  // Does not fit next to the cached 40 MiB on another stream: the cache is released first.
  Tensor b = Tensor::Empty(pool_, DType::kU8, {50 << 20}, FakeStream(2)).value();
  EXPECT_EQ(fake_.frees, 1);
  EXPECT_EQ(pool_.stats().reserved_bytes, 50 << 20);
  Result<Tensor> c = Tensor::Empty(pool_, DType::kU8, {20 << 20}, FakeStream(2));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kOutOfMemory);
  // The pool's state in readable units: 50 MiB reserved, all in use.
  EXPECT_NE(c.status().message().find("in_use=50.0 MiB"), std::string::npos)
      << c.status().message();
}

TEST_F(CachingPoolTest, ReleaseCachedReturnsEverythingUnused) {
  Tensor keep = Tensor::Empty(pool_, DType::kU8, {100}, FakeStream(1)).value();
  { Tensor t = Tensor::Empty(pool_, DType::kU8, {8 << 20}, FakeStream(1)).value(); }
  pool_.ReleaseCached();
  EXPECT_EQ(fake_.frees, 1);
  EXPECT_EQ(pool_.stats().reserved_bytes, CachingPool::kSmallSegment);
  EXPECT_EQ(pool_.stats().in_use_bytes, CachingPool::kAlignment);
}

TEST(PinnedAllocatorTest, TensorsFromItAreCountedAndReturned) {
  PinnedAllocator pinned;
  {
    auto a = Tensor::Empty(pinned, DType::kI32, {1000});
    auto b = Tensor::Empty(pinned, DType::kF32, {5});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a->device().is_cpu());
    static_cast<int32_t*>(a->data())[999] = 7;  // host-writable, whole
    EXPECT_EQ(pinned.stats().in_use_bytes, 2 * 4096);  // page-rounded
    EXPECT_EQ(pinned.stats().num_allocs, 2);
  }
  EXPECT_EQ(pinned.stats().in_use_bytes, 0);
  EXPECT_EQ(pinned.stats().num_backend_frees, 2);
  EXPECT_EQ(pinned.stats().high_water_in_use, 2 * 4096);
}

}  // namespace
}  // namespace tandem::kernels
