// Node resources: the GPUs, CPU slots and pinned host memory one node offers to a job.
//
// DiscoverResources() asks the CUDA runtime for devices (name, memory) when tandem is built
// with CUDA and a device is visible. TANDEM_FAKE_GPUS=N declares N fake GPUs instead, so
// placement and GPU-pinned actors can be tested on machines without one (fake GPUs must
// not be made current: ActorOptions::make_device_current = false). CPU slots default to the
// hardware threads; pinned bytes to half the physical memory (TANDEM_PINNED_BYTES overrides).
//
// Thread-safety: plain values and stateless functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::sched {

struct GpuInfo {
  int index = 0;              // CUDA device ordinal
  std::string name;           // "NVIDIA H200" or "fake-gpu"
  uint64_t memory_bytes = 0;  // total device memory
  bool fake = false;          // declared for tests; never passed to cudaSetDevice
  int compute_capability = 90;  // major * 10 + minor (fake GPUs: an sm_90 unless set)
};

struct NodeResources {
  std::vector<GpuInfo> gpus;
  int cpu_slots = 0;
  uint64_t pinned_bytes = 0;  // pinned host memory the object store may take

  bool fake_gpus() const { return !gpus.empty() && gpus.front().fake; }
  // "2 GPUs (NVIDIA H200 139.8 GiB ×2), 16 CPU slots, 64.0 GiB pinned".
  std::string ToString() const;
};

// `count` fake GPUs of `memory_bytes` each, plus the given CPU slots and pinned bytes.
NodeResources FakeResources(int count, int cpu_slots = 8, uint64_t pinned_bytes = 1ull << 30,
                            uint64_t memory_bytes = 80ull << 30);

// Discovers this node's resources (see the header comment). Errors: InvalidArgument for a
// malformed TANDEM_FAKE_GPUS / TANDEM_PINNED_BYTES; CudaError if the CUDA runtime fails in a
// way other than "no device".
Result<NodeResources> DiscoverResources();

}  // namespace tandem::sched
