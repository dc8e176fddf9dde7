#include "kernels/core/device_props.h"

#include <algorithm>
#include <array>
#include <atomic>

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem::kernels {
namespace {

constexpr int kMaxDevices = 64;

// The properties kept per device index.
enum Prop { kSmCount, kCcMajor, kProps };

// 0: not queried yet. Racing first queries store the same value.
std::array<std::atomic<int>, kMaxDevices>& Cached(Prop prop) {
  static std::array<std::array<std::atomic<int>, kMaxDevices>, kProps> values{};
  return values[prop];
}

// 0 when the device cannot be queried.
int Query(Prop prop, int device) {
#ifdef TANDEM_HAVE_CUDA
  const cudaDeviceAttr attr =
      prop == kSmCount ? cudaDevAttrMultiProcessorCount : cudaDevAttrComputeCapabilityMajor;
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) == cudaSuccess && value > 0) return value;
  (void)cudaGetLastError();
#endif
  (void)prop;
  (void)device;
  return 0;
}

// The property of `device`, queried once (a failed query is not kept: a later one may succeed).
int Get(Prop prop, int device) {
  if (device < 0 || device >= kMaxDevices) return Query(prop, device);
  std::atomic<int>& slot = Cached(prop)[device];
  int value = slot.load(std::memory_order_relaxed);
  if (value == 0) {
    value = Query(prop, device);
    if (value != 0) slot.store(value, std::memory_order_relaxed);
  }
  return value;
}

// The calling thread's current device, -1 if it cannot be queried.
int CurrentDevice() {
  int device = 0;
#ifdef TANDEM_HAVE_CUDA
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
#endif
  return device;
}

}  // namespace

int DeviceSmCount(int device) { return std::max(1, Get(kSmCount, device)); }

int CurrentDeviceSmCount() {
  const int device = CurrentDevice();
  return device < 0 ? 1 : DeviceSmCount(device);
}

int DeviceComputeCapabilityMajor(int device) { return Get(kCcMajor, device); }

int CurrentDeviceComputeCapabilityMajor() {
  const int device = CurrentDevice();
  return device < 0 ? 0 : DeviceComputeCapabilityMajor(device);
}

}  // namespace tandem::kernels
