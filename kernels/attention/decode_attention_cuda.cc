// CachedCausalAttentionForward for CUDA builds: checks, NVTX range, launch
// (decode_attention.cu), or the CPU reference for host tensors.
#include <cmath>

#include "kernels/attention/decode_attention.h"
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"

namespace tandem::kernels {
namespace attention_internal {
cudaError_t LaunchCachedAttention(int64_t b, int64_t p, int64_t hq, int64_t hk, int64_t d,
                                  const void* q, const void* k, const void* v, float scale,
                                  void* out, Stream stream);
}  // namespace attention_internal

Status CachedCausalAttentionForward(const TensorView& q, const TensorView& k,
                                    const TensorView& v, float scale, TensorView out,
                                    Stream stream) {
  constexpr const char* kOp = "CachedCausalAttentionForward";
  if (q.device().is_cpu()) return CachedCausalAttentionForwardCpu(q, k, v, scale, out, stream);
  ASSIGN_OR_RETURN(CachedAttentionDims d, CheckCachedAttention(kOp, q, k, v, out));
  if (d.d < 1 || d.d > 256)
    return InvalidArgumentError("{}: head_dim {} unsupported on CUDA (at most 256)", kOp, d.d);
  const float sc = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(d.d));
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(attention_internal::LaunchCachedAttention(
      d.b, d.p, d.hq, d.hk, d.d, q.data(), k.data(), v.data(), sc, out.data(), stream));
  return Status::Ok();
}

}  // namespace tandem::kernels
