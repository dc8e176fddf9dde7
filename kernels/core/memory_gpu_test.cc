// GPU tests of the caching pool, copies, stream/event wrappers, and Philox CPU/GPU identity.
#include <gtest/gtest.h>

#include <bit>

#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/random/philox.h"
#include "kernels/core/stream.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

using testing::Pool;
using testing::ToHost;

TEST(CudaPoolGpuTest, SteadyStateAllocatesNothingNew) {
  CudaStream s = CudaStream::Create(0).value();
  auto step = [&] {
    std::vector<Tensor> live;
    for (int64_t n : {int64_t{1} << 10, int64_t{3} << 20, int64_t{64} << 20, int64_t{12345}})
      live.push_back(Tensor::Empty(Pool(), DType::kU8, {n}, s.get()).value());
  };
  step();
  const int64_t mallocs = Pool().stats().num_backend_allocs;
  for (int i = 0; i < 10; ++i) step();
  EXPECT_EQ(Pool().stats().num_backend_allocs, mallocs) << Pool().stats().ToString();
  ASSERT_TRUE(s.Synchronize().ok());
}

TEST(CudaPoolGpuTest, CopiesRoundTripAndZeroFill) {
  std::vector<float> host(1000);
  for (int i = 0; i < 1000; ++i) host[i] = static_cast<float>(i) * 0.5f;
  Tensor a = testing::ToDevice(host, DType::kF32, {1000});
  Tensor b = Tensor::Zeros(Pool(), DType::kF32, {10, 100}).value();
  EXPECT_EQ(ToHost<float>(b), std::vector<float>(1000, 0.f));
  ASSERT_TRUE(Copy(b, a, nullptr).ok());
  EXPECT_EQ(ToHost<float>(b), host);
}

TEST(CudaPoolGpuTest, RecordedStreamDelaysReuse) {
  CudaStream s1 = CudaStream::Create(0).value(), s2 = CudaStream::Create(0).value();
  void* p;
  {
    Tensor t = Tensor::Empty(Pool(), DType::kU8, {8 << 20}, s1.get()).value();
    p = t.data();
    t.RecordStream(s2.get());
  }
  ASSERT_TRUE(s2.Synchronize().ok());  // the marker on s2 completes
  Tensor u = Tensor::Empty(Pool(), DType::kU8, {8 << 20}, s1.get()).value();
  EXPECT_EQ(u.data(), p) << "after s2 finished the block is reusable on s1";
}

TEST(CudaPoolGpuTest, TwoOwnersPoolsAreIndependent) {
  CudaStream s = CudaStream::Create(0).value();
  void* freed;
  {
    DevicePools a, b;
    CachingPool* pa = a.Pool(0).value();
    CachingPool* pb = b.Pool(0).value();
    ASSERT_NE(pa, pb);
    {
      Tensor t = Tensor::Empty(*pa, DType::kU8, {4 << 20}, s.get()).value();
      freed = t.data();
    }
    // A shared pool would hand the cached block back for the same size on the same stream.
    Tensor u = Tensor::Empty(*pb, DType::kU8, {4 << 20}, s.get()).value();
    EXPECT_NE(u.data(), freed);
    EXPECT_EQ(pa->stats().num_backend_allocs, 1);
    EXPECT_EQ(pb->stats().num_backend_allocs, 1);
    EXPECT_EQ(pa->stats().in_use_bytes, 0);
    EXPECT_GT(pb->stats().in_use_bytes, 0);
    ASSERT_TRUE(s.Synchronize().ok());
  }
  // Both owners gone: their segments went back to CUDA, and a third owner starts empty.
  DevicePools c;
  EXPECT_EQ(c.Pool(0).value()->stats().reserved_bytes, 0);
}

TEST(StreamGpuTest, EventsTimeAndComplete) {
  CudaStream s = CudaStream::Create(0).value();
  CudaEvent start = CudaEvent::Create(0, true).value(), stop = CudaEvent::Create(0, true).value();
  Tensor t = Tensor::Empty(Pool(), DType::kU8, {64 << 20}, s.get()).value();
  ASSERT_TRUE(start.Record(s.get()).ok());
  ASSERT_TRUE(FillZero(t, s.get()).ok());
  ASSERT_TRUE(stop.Record(s.get()).ok());
  ASSERT_TRUE(stop.Synchronize().ok());
  EXPECT_TRUE(stop.Done().value());
  EXPECT_GE(stop.ElapsedMsSince(start).value(), 0.f);
  CudaStream moved = std::move(s);
  EXPECT_EQ(s.get(), nullptr);  // NOLINT: moved-from is empty
  EXPECT_NE(moved.get(), nullptr);
}

TEST(PhiloxGpuTest, GpuMatchesCpuBitForBit) {
  for (int64_t n : {1, 7, 1000003}) {
    std::vector<float> cpu(n);
    ASSERT_TRUE(
        PhiloxUniformFill(TensorView(cpu.data(), DType::kF32, {n}), -0.5f, 2.f, 1234, 99, nullptr)
            .ok());
    Tensor d = Tensor::Empty(Pool(), DType::kF32, {n}).value();
    ASSERT_TRUE(PhiloxUniformFill(d, -0.5f, 2.f, 1234, 99, nullptr).ok());
    std::vector<float> gpu = ToHost<float>(d);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(gpu[i]), std::bit_cast<uint32_t>(cpu[i]))
          << "n=" << n << " i=" << i;
  }
}

}  // namespace
}  // namespace tandem::kernels
