// cuda::EmbeddingForward: argument checks, NVTX range, launch (embedding.cu).
#include "kernels/cuda_check.h"
#include "kernels/embedding.h"
#include "kernels/embedding_kernels.h"
#include "kernels/stream.h"

namespace tandem::kernels::cuda {

Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s) {
  RETURN_IF_ERROR(internal::CheckEmbedding(out, ids, weight));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("EmbeddingForward");
  CUDA_RETURN_IF_ERROR(LaunchEmbeddingForward(out.data(), ids.data_as<const int32_t>(),
                                              weight.data(), ids.dim(0), weight.dim(0),
                                              weight.dim(1), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
