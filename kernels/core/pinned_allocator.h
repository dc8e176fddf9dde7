// PinnedAllocator: page-locked host memory for the staging buffers that asynchronous copies
// read or write (cudaHostAlloc, portable to every device), so no code calls cudaMallocHost
// itself and every pinned byte is owned by a Tensor and counted here. Without CUDA, or with
// no device visible, it hands out page-aligned host memory instead (what a CPU job needs).
// Tensors from it live on Device::Cpu(); streams are ignored.
//
// Thread-safety: safe to call from any thread. It must outlive the tensors it made.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/core/memory.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::kernels {

class PinnedAllocator final : public Allocator {
 public:
  PinnedAllocator();
  ~PinnedAllocator() override;  // REQUIRES: nothing in use (checked).
  PinnedAllocator(const PinnedAllocator&) = delete;
  PinnedAllocator& operator=(const PinnedAllocator&) = delete;

  Device device() const override { return Device::Cpu(); }
  // OutOfMemory naming the size when the host cannot pin it.
  Result<void*> Allocate(int64_t nbytes, Stream stream) override;
  void Free(void* ptr, Stream stream, const std::vector<Stream>& extra_streams) override;
  AllocatorStats stats() const override { return ledger_.stats(); }
  // True when the memory is page-locked (a CUDA build with a device).
  bool pinned() const { return pinned_; }

 private:
  const bool pinned_;  // decided once, so Free matches Allocate
  DirectAllocationLedger ledger_;
};

}  // namespace tandem::kernels
