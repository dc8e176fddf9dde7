#include "kernels/core/pinned_allocator.h"

#include <algorithm>
#include <cstdlib>

#include "kernels/core/stream.h"
#include "runtime/core/logging.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/core/cuda_check.h"
#endif

namespace tandem::kernels {

PinnedAllocator::~PinnedAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CHECK_MSG(sizes_.empty(), "PinnedAllocator destroyed with {} buffers ({} bytes) in use",
                   sizes_.size(), stats_.in_use_bytes);
}

PinnedAllocator::PinnedAllocator() : pinned_(CudaDeviceCount() > 0) {}

Result<void*> PinnedAllocator::Allocate(int64_t nbytes, Stream) {
  if (nbytes < 0) return InvalidArgumentError("PinnedAllocator: negative size {}", nbytes);
  const int64_t size = (std::max<int64_t>(nbytes, 1) + 4095) / 4096 * 4096;
  void* p = nullptr;
#ifdef TANDEM_HAVE_CUDA
  if (pinned()) {
    cudaError_t e = cudaHostAlloc(&p, static_cast<size_t>(size), cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return OutOfMemoryError("PinnedAllocator: cannot pin {} bytes of host memory", size);
    }
    CUDA_RETURN_IF_ERROR(e);
  }
#endif
  if (p == nullptr) {
    p = std::aligned_alloc(4096, static_cast<size_t>(size));
    if (p == nullptr) return OutOfMemoryError("PinnedAllocator: cannot allocate {} bytes", size);
  }
  std::lock_guard<std::mutex> lock(mu_);
  sizes_[p] = size;
  stats_.in_use_bytes += size;
  stats_.reserved_bytes += size;
  stats_.high_water_in_use = std::max(stats_.high_water_in_use, stats_.in_use_bytes);
  stats_.high_water_reserved = std::max(stats_.high_water_reserved, stats_.reserved_bytes);
  ++stats_.num_allocs;
  ++stats_.num_backend_allocs;
  return p;
}

void PinnedAllocator::Free(void* ptr, Stream, const std::vector<Stream>&) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    TANDEM_CHECK_MSG(it != sizes_.end(), "PinnedAllocator::Free of unknown pointer {}", ptr);
    stats_.in_use_bytes -= it->second;
    stats_.reserved_bytes -= it->second;
    ++stats_.num_backend_frees;
    sizes_.erase(it);
  }
#ifdef TANDEM_HAVE_CUDA
  if (pinned()) {
    CUDA_LOG_IF_ERROR(cudaFreeHost(ptr));
    return;
  }
#endif
  std::free(ptr);
}

AllocatorStats PinnedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace tandem::kernels
