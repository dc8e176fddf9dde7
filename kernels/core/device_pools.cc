#include "kernels/core/device_pools.h"

#include <utility>

namespace tandem::kernels {

DevicePools::DevicePools() : DevicePools(&NewCudaDeviceMemory) {}

DevicePools::DevicePools(BackendFactory factory) : factory_(std::move(factory)) {}

DevicePools::~DevicePools() = default;

Result<CachingPool*> DevicePools::Pool(int index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pools_.find(index);
  if (it != pools_.end()) return it->second.get();
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceMemory> backend, factory_(index));
  auto pool = std::make_unique<CachingPool>(std::move(backend));
  CachingPool* p = pool.get();
  pools_.emplace(index, std::move(pool));
  return p;
}

Result<Allocator*> DevicePools::For(Device device) {
  if (device.is_cpu()) return static_cast<Allocator*>(&HostAllocator());
  ASSIGN_OR_RETURN(CachingPool * pool, Pool(device.index));
  return static_cast<Allocator*>(pool);
}

std::map<int, AllocatorStats> DevicePools::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, AllocatorStats> out;
  for (const auto& [index, pool] : pools_) out[index] = pool->stats();
  return out;
}

}  // namespace tandem::kernels
