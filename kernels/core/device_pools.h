// DevicePools: the caching pools (kernels/core/memory.h) of one owner, one per CUDA device,
// made on first use. A job owns one (in its JobRegistry), as does a benchmark or a test, and
// hands the pool of a device to the models and actors that allocate there; nothing in the
// process holds pools on the side, so two jobs (or two tests) never share cached blocks and
// a job's device memory goes back to CUDA when the job ends.
//
// Contract: every tensor from a pool must be freed before the DevicePools is destroyed
// (CachingPool checks this). Pools live as long as their DevicePools; pointers to them stay
// valid until then.
//
// Thread-safety: Pool() and For() are safe from any thread (one mutex); each pool is
// thread-safe itself.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/core/memory.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::kernels {

class DevicePools {
 public:
  // Makes the backend of device `index`'s pool.
  using BackendFactory = std::function<Result<std::unique_ptr<DeviceMemory>>(int index)>;

  // Pools over CUDA memory (NewCudaDeviceMemory): Pool() is Unavailable without CUDA.
  DevicePools();
  // Pools over the backends `factory` makes (a fake in CPU tests).
  explicit DevicePools(BackendFactory factory);
  ~DevicePools();
  DevicePools(const DevicePools&) = delete;
  DevicePools& operator=(const DevicePools&) = delete;

  // The pool of CUDA device `index`, made on first use. InvalidArgument for a device that
  // does not exist, Unavailable without CUDA.
  Result<CachingPool*> Pool(int index) EXCLUDES(mu_);
  // Where tensors of `device` come from: the process's HostAllocator() for the CPU (it
  // caches nothing), Pool(index) for a CUDA device.
  Result<Allocator*> For(Device device);
  // Stats of every pool made so far, by device index.
  std::map<int, AllocatorStats> stats() const EXCLUDES(mu_);

 private:
  BackendFactory factory_;
  mutable std::mutex mu_;
  std::map<int, std::unique_ptr<CachingPool>> pools_ GUARDED_BY(mu_);
};

}  // namespace tandem::kernels
