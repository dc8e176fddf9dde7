#include "runtime/store/cuda_copy_engine.h"

#include "runtime/core/logging.h"

namespace tandem {
namespace {

#define STORE_CUDA_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                      \
    cudaError_t _e = (expr);                                                                \
    if (_e != cudaSuccess)                                                                  \
      return CudaError("{}:{}: {}: {}", __FILE__, __LINE__, #expr, cudaGetErrorString(_e)); \
  } while (0)

class CudaFence final : public CopyFence {
 public:
  explicit CudaFence(cudaEvent_t event) : event_(event) {}
  ~CudaFence() override {
    cudaError_t e = cudaEventDestroy(event_);
    if (e != cudaSuccess) TLOG_ERROR("cudaEventDestroy: {}", cudaGetErrorString(e));
  }
  bool IsComplete() const override {
    cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) {
      // A sticky device error: the copy never completes, so its object is never freed.
      // That leaks, visibly, rather than letting a failed copy's bytes be reused.
      TLOG_ERROR("copy fence query failed: {}; its object stays held", cudaGetErrorString(e));
    }
    return false;
  }

 private:
  cudaEvent_t event_;
};

}  // namespace

Result<std::unique_ptr<CopyFence>> CudaCopyEngine::Enqueue(void* dst, const void* src,
                                                           uint64_t bytes) {
  cudaEvent_t event = nullptr;
  STORE_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  auto fence = std::make_unique<CudaFence>(event);
  STORE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  cudaError_t e = cudaEventRecord(event, stream_);
  if (e != cudaSuccess) {
    // The copy is queued but has no fence: wait for it here (error path only) so the caller
    // may treat the failure as "no copy in flight".
    cudaError_t sync = cudaStreamSynchronize(stream_);
    return CudaError("cudaEventRecord after a store copy: {} (stream sync: {})",
                     cudaGetErrorString(e), cudaGetErrorString(sync));
  }
  return std::unique_ptr<CopyFence>(std::move(fence));
}

}  // namespace tandem
