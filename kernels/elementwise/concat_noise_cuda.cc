// cuda::ConcatNoiseForward: argument checks, NVTX range, launch (concat_noise.cu).
#include "kernels/elementwise/concat_noise.h"
#include "kernels/elementwise/concat_noise_kernels.h"
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"

namespace tandem::kernels::cuda {

Status ConcatNoiseForward(TensorView out, std::span<const TensorView> inputs, float noise_std,
                          uint64_t seed, uint64_t offset, Stream s) {
  RETURN_IF_ERROR(internal::CheckConcatNoise(out, inputs, noise_std));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("ConcatNoiseForward");
  const void* ptrs[kMaxConcatInputs];
  for (size_t i = 0; i < inputs.size(); ++i) ptrs[i] = inputs[i].data();
  CUDA_RETURN_IF_ERROR(LaunchConcatNoise(out.data(), ptrs, static_cast<int>(inputs.size()),
                                         out.dim(0), inputs[0].dim(1), noise_std, seed, offset, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
