// CPU tests of kernels/core/device_pools.h against fake device memory: each DevicePools owns
// its pools (two owners never share a block or a count), one pool per device, made once,
// and everything is given back to the backend when the owner goes.
#include "kernels/core/device_pools.h"

#include <gtest/gtest.h>

#include "kernels/testing/fake_device_memory.h"

namespace tandem::kernels {
namespace {

using testing::FakeDeviceMemory;

Stream FakeStream(int i) { return reinterpret_cast<Stream>(static_cast<intptr_t>(0x1000 * i)); }

// Pools over fakes that all count into `state`.
DevicePools::BackendFactory FakeBackends(FakeDeviceMemory::State* state) {
  return [state](int index) -> Result<std::unique_ptr<DeviceMemory>> {
    return std::unique_ptr<DeviceMemory>(new FakeDeviceMemory(state, index));
  };
}

TEST(DevicePoolsTest, TwoOwnersNeverShareCachedBlocks) {
  FakeDeviceMemory::State fa, fb;
  DevicePools a(FakeBackends(&fa)), b(FakeBackends(&fb));
  CachingPool* pa = a.Pool(0).value();
  CachingPool* pb = b.Pool(0).value();
  ASSERT_NE(pa, pb);
  void* freed;
  {
    Tensor t = Tensor::Empty(*pa, DType::kU8, {1 << 20}, FakeStream(1)).value();
    freed = t.data();
  }
  EXPECT_GT(pa->stats().cached_bytes, 0);
  // Same device, same stream, same size: a shared pool would hand back `freed` at once.
  Tensor u = Tensor::Empty(*pb, DType::kU8, {1 << 20}, FakeStream(1)).value();
  EXPECT_NE(u.data(), freed);
  EXPECT_EQ(fa.mallocs, 1);
  EXPECT_EQ(fb.mallocs, 1);
  EXPECT_EQ(pb->stats().num_allocs, 1);
  EXPECT_EQ(pa->stats().num_allocs, 1);
  EXPECT_EQ(pa->stats().in_use_bytes, 0);
  EXPECT_GT(pb->stats().in_use_bytes, 0);
}

TEST(DevicePoolsTest, OnePoolPerDeviceMadeOnce) {
  FakeDeviceMemory::State f;
  int made = 0;
  DevicePools pools([&](int index) -> Result<std::unique_ptr<DeviceMemory>> {
    ++made;
    return std::unique_ptr<DeviceMemory>(new FakeDeviceMemory(&f, index));
  });
  CachingPool* p0 = pools.Pool(0).value();
  CachingPool* p1 = pools.Pool(1).value();
  EXPECT_NE(p0, p1);
  EXPECT_EQ(pools.Pool(0).value(), p0);
  EXPECT_EQ(pools.For(Device::Cuda(1)).value(), p1);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(p1->device(), Device::Cuda(1));
  EXPECT_EQ(pools.For(Device::Cpu()).value(), &HostAllocator());
  Tensor t = Tensor::Empty(*p1, DType::kU8, {100}, FakeStream(1)).value();
  std::map<int, AllocatorStats> stats = pools.stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].in_use_bytes, 0);
  EXPECT_EQ(stats[1].in_use_bytes, CachingPool::kAlignment);
}

TEST(DevicePoolsTest, DestroyingTheOwnerReturnsItsMemory) {
  FakeDeviceMemory::State f;
  {
    DevicePools pools(FakeBackends(&f));
    { Tensor t = Tensor::Empty(*pools.Pool(0).value(), DType::kU8, {8 << 20}, FakeStream(1)).value(); }
    EXPECT_EQ(f.live.size(), 1u);  // cached by the pool
  }
  EXPECT_EQ(f.live.size(), 0u);
  EXPECT_EQ(f.frees, f.mallocs);
}

TEST(DevicePoolsTest, BackendErrorsComeBackAndNothingIsCached) {
  int calls = 0;
  DevicePools pools([&](int index) -> Result<std::unique_ptr<DeviceMemory>> {
    ++calls;
    return InvalidArgumentError("no device {}", index);
  });
  Result<CachingPool*> p = pools.Pool(3);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("no device 3"), std::string::npos);
  EXPECT_FALSE(pools.For(Device::Cuda(3)).ok());
  EXPECT_EQ(calls, 2);  // a failed pool is not remembered
  EXPECT_TRUE(pools.stats().empty());
}

TEST(DevicePoolsTest, DefaultPoolsRefuseDevicesThatDoNotExist) {
  DevicePools pools;
  Result<CachingPool*> p = pools.Pool(1 << 20);
  ASSERT_FALSE(p.ok());
  // Unavailable in a CPU-only build, InvalidArgument with CUDA.
  EXPECT_TRUE(p.status().code() == StatusCode::kUnavailable ||
              p.status().code() == StatusCode::kInvalidArgument)
      << p.status().ToString();
}

}  // namespace
}  // namespace tandem::kernels
