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
  TANDEM_CHECK_MSG(ledger_.live() == 0, "PinnedAllocator destroyed with {} buffers ({} bytes) in use",
                   ledger_.live(), ledger_.stats().in_use_bytes);
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
  ledger_.Add(p, size);
  return p;
}

void PinnedAllocator::Free(void* ptr, Stream, const std::vector<Stream>&) {
  ledger_.Remove(ptr, "PinnedAllocator");
#ifdef TANDEM_HAVE_CUDA
  if (pinned()) {
    CUDA_LOG_IF_ERROR(cudaFreeHost(ptr));
    return;
  }
#endif
  std::free(ptr);
}

}  // namespace tandem::kernels
