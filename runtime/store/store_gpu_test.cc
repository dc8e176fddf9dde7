// The store invariant on a real GPU: a cudaMemcpyAsync from a pinned store object is queued
// behind a ~200 ms spin kernel, every user ref is dropped, and the test keeps allocating.
// The arena has room for exactly two objects, so while the copy is pending the only free
// range is the other one; the in-flight object's range must not be handed out until the
// copy's event completes, and the bytes that reach the device must be the original ones.
#include <cuda_runtime_api.h>

#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/store/cuda_copy_engine.h"
#include "runtime/testing/gpu_spin_kernel.h"
#include "runtime/store/store_test_fixture.h"

namespace tandem {
namespace {

constexpr uint64_t kObj = 1 << 20;
constexpr uint64_t kSpinNs = 200'000'000;

uint8_t PatternByte(uint64_t i) { return static_cast<uint8_t>(17 + i * 31); }

bool Overlaps(const uint8_t* a, const uint8_t* b, uint64_t n) { return a < b + n && b < a + n; }

#define ASSERT_CUDA(expr)                                                  \
  do {                                                                     \
    cudaError_t _e = (expr);                                               \
    ASSERT_EQ(_e, cudaSuccess) << #expr << ": " << cudaGetErrorString(_e); \
  } while (0)

TEST_F(StoreTest, GpuInflightCopyBlocksReuseUntilEventCompletes) {
  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* device = nullptr;
  ASSERT_CUDA(cudaMalloc(&device, kObj));
  ASSERT_CUDA(cudaMemsetAsync(device, 0, kObj, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  CudaCopyEngine engine(stream);

  StoreOptions o;
  o.capacity_bytes = 2 * kObj;
  OpenStore(o, ArenaBacking::kAuto);
  ASSERT_EQ(store_->arena().kind(), ArenaKind::kCudaPinned);

  std::shared_ptr<const CopyFence> fence;
  const uint8_t* a_range = nullptr;
  {
    Result<MutableObject> a = store_->Create(kObj, "target");
    ASSERT_TRUE(a.ok());
    for (uint64_t i = 0; i < kObj; ++i) a->data()[i] = PatternByte(i);
    ObjectRef ref = a->Seal();
    a_range = ref.data();
    ASSERT_CUDA(tandem::testing::LaunchSpin(kSpinNs, stream));
    Result<std::shared_ptr<const CopyFence>> f = store_->CopyOut(ref, 0, device, kObj, engine);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    fence = *f;
  }  // every user reference is gone; only the copy's fence holds the object

  int pending_rounds = 0;
  while (!fence->IsComplete()) {
    ++pending_rounds;
    {
      Result<MutableObject> b = store_->Create(kObj, "drafter", Duration::zero());
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      std::memset(b->data(), 0xEE, kObj);  // would corrupt the copy if it were the old range
      if (Overlaps(b->data(), a_range, kObj)) {
        ASSERT_TRUE(fence->IsComplete()) << "old range reused while the copy was in flight";
      }
      Result<MutableObject> c = store_->Create(kObj, "drafter", Duration::zero());
      if (c.ok()) {
        ASSERT_TRUE(fence->IsComplete()) << "old range reused while the copy was in flight";
      }
    }
    // Paces the probe loop over the 200 ms kernel (GPU-only test): each round checks a
    // fresh allocation; the count below needs only 11 of ~2000 possible rounds.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // The copy sat behind a 200 ms kernel, so the loop must have seen it pending many times.
  EXPECT_GT(pending_rounds, 10);

  std::vector<uint8_t> back(kObj);
  ASSERT_CUDA(cudaMemcpy(back.data(), device, kObj, cudaMemcpyDeviceToHost));
  for (uint64_t i = 0; i < kObj; ++i) ASSERT_EQ(back[i], PatternByte(i)) << "byte " << i;

  store_->PollFences();
  {
    Result<MutableObject> x = store_->Create(kObj, "drafter", Duration::zero());
    Result<MutableObject> y = store_->Create(kObj, "drafter", Duration::zero());
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_TRUE(Overlaps(x->data(), a_range, kObj) || Overlaps(y->data(), a_range, kObj));
  }
  fence.reset();
  ASSERT_CUDA(cudaFree(device));
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace tandem
