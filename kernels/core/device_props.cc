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

// 0: not queried yet. Racing first queries store the same value.
std::array<std::atomic<int>, kMaxDevices>& SmCounts() {
  static std::array<std::atomic<int>, kMaxDevices> counts{};
  return counts;
}

// 0 when the device cannot be queried.
int QuerySmCount(int device) {
#ifdef TANDEM_HAVE_CUDA
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
      sms > 0)
    return sms;
  (void)cudaGetLastError();
#endif
  (void)device;
  return 0;
}

}  // namespace

int DeviceSmCount(int device) {
  if (device < 0 || device >= kMaxDevices) return std::max(1, QuerySmCount(device));
  std::atomic<int>& slot = SmCounts()[device];
  int sms = slot.load(std::memory_order_relaxed);
  if (sms == 0) {
    sms = QuerySmCount(device);
    if (sms == 0) return 1;  // not kept: a later query may succeed
    slot.store(sms, std::memory_order_relaxed);
  }
  return sms;
}

int CurrentDeviceSmCount() {
  int device = 0;
#ifdef TANDEM_HAVE_CUDA
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
#endif
  return DeviceSmCount(device);
}

}  // namespace tandem::kernels
