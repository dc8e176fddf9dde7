#include "runtime/store/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/core/clock.h"
#include "runtime/core/logging.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem {

std::string_view ArenaKindName(ArenaKind kind) {
  return kind == ArenaKind::kCudaPinned ? "cuda-pinned" : "host-pages";
}

Result<std::unique_ptr<PinnedArena>> PinnedArena::Create(uint64_t bytes, ArenaBacking backing) {
  if (bytes == 0) return InvalidArgumentError("pinned arena size must be > 0");
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t size = (bytes + page - 1) / page * page;
#ifdef TANDEM_HAVE_CUDA
  int devices = 0;
  const bool probed = backing == ArenaBacking::kAuto;
  if (probed && cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (e != cudaSuccess) {
      return CudaError("cudaHostAlloc of the {} store arena failed: {}; lower the store "
                       "capacity", FormatBytes(size), cudaGetErrorString(e));
    }
    std::memset(p, 0, size);
    return std::unique_ptr<PinnedArena>(
        new PinnedArena(static_cast<uint8_t*>(p), size, ArenaKind::kCudaPinned));
  }
  if (probed) cudaGetLastError();  // a failed probe must not linger as the last error
#endif
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    return OutOfMemoryError("mmap of the {} store arena failed: {}; lower the store capacity",
                            FormatBytes(size), std::strerror(errno));
  }
  return std::unique_ptr<PinnedArena>(
      new PinnedArena(static_cast<uint8_t*>(p), size, ArenaKind::kHostPages));
}

PinnedArena::~PinnedArena() {
#ifdef TANDEM_HAVE_CUDA
  if (kind_ == ArenaKind::kCudaPinned) {
    cudaError_t e = cudaFreeHost(base_);
    if (e != cudaSuccess) TLOG_ERROR("cudaFreeHost of the store arena: {}", cudaGetErrorString(e));
    return;
  }
#endif
  munmap(base_, size_);
}

}  // namespace tandem
