// CudaCopyEngine: copies to and from store objects with cudaMemcpyAsync on one stream.
//
// Each copy gets its own event recorded right after the memcpy on the same stream; its fence
// is complete when cudaEventQuery on that event returns cudaSuccess. Queries never block.
// Only built when CUDA is on (include under #ifdef TANDEM_HAVE_CUDA).
//
// Thread-safety: Enqueue may be called from several threads (CUDA orders them on the stream
// in call order); fences may be queried from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include "runtime/store/copy_engine.h"

namespace tandem {

class CudaCopyEngine final : public CopyEngine {
 public:
  // `stream` is not owned and must outlive every fence this engine returns. The calling
  // thread's current device must be the one `stream` belongs to.
  explicit CudaCopyEngine(cudaStream_t stream) : stream_(stream) {}

  // Copies with cudaMemcpyDefault (direction from the pointers; needs unified addressing,
  // which every supported GPU has).
  Result<std::unique_ptr<CopyFence>> Enqueue(void* dst, const void* src,
                                             uint64_t bytes) override;
  std::string_view name() const override { return "cuda"; }
  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_;
};

}  // namespace tandem
