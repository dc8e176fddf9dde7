// GPU-pinned actors on a real device: the device is current on the actor's own thread, for
// OnStart and every message, and stays so across restarts. Needs a CUDA device (label gpu).
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include "runtime/actor/actor_test_util.h"
#include "runtime/actor/system.h"

namespace tandem {
namespace {

using testing::ActorFixture;

int CurrentDevice() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) return -2;
  return d;
}

class DeviceProbe : public Actor, public testing::LiveCounted {
 public:
  Status OnStart() override {
    start_device_ = CurrentDevice();
    return Status::Ok();
  }
  int StartDevice() { return start_device_; }
  int Device() { return CurrentDevice(); }
  // Allocates and frees on the current device; fails if the device is not usable.
  Status Touch() {
    void* p = nullptr;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return CudaError("cudaMalloc failed");
    if (cudaFree(p) != cudaSuccess) return CudaError("cudaFree failed");
    return Status::Ok();
  }
  int Boom() { throw std::runtime_error("restart me"); }

 private:
  int start_device_ = -3;
};

TEST_F(ActorFixture, PinnedActorsRunWithTheirDeviceCurrent) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const int last = count - 1;  // the highest device, so a wrong default (0) shows up
  ActorSystem sys;
  ActorOptions opts;
  opts.gpu = last;
  opts.max_restarts = 1;
  opts.restart_backoff = std::chrono::milliseconds(1);
  auto h = sys.SpawnActor<DeviceProbe>("probe", opts);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(*h->call(&DeviceProbe::StartDevice).Get(), last);
  EXPECT_EQ(*h->call(&DeviceProbe::Device).Get(), last);
  EXPECT_TRUE(h->call(&DeviceProbe::Touch).Get().ok());
  EXPECT_FALSE(h->call(&DeviceProbe::Boom).Get().ok());
  EXPECT_EQ(*h->call(&DeviceProbe::StartDevice).Get(), last);  // the restarted instance
  if (count > 1) {
    opts.gpu = 0;
    auto h0 = sys.SpawnActor<DeviceProbe>("probe0", opts);
    ASSERT_TRUE(h0.ok());
    EXPECT_EQ(*h0->call(&DeviceProbe::Device).Get(), 0);
  }
}

TEST_F(ActorFixture, BadDeviceIsASpawnError) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ActorSystem sys;
  ActorOptions opts;
  opts.gpu = count + 3;
  auto h = sys.SpawnActor<DeviceProbe>("nodevice", opts);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kCudaError);
  EXPECT_NE(h.status().message().find("cudaSetDevice"), std::string::npos);
}

}  // namespace
}  // namespace tandem
