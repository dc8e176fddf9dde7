// CUDA SwiGLU -> e4m3. Algorithm: one warp per (row, 128-column group), grid-stride; each
// lane forms four bf16(silu(g) * u) values (fp32 math, one rounding, as swiglu.cu) and the
// warp quantizes the group (fp8_device.cuh). Padding rows are zeroed.
#include <cuda_bf16.h>

#include "kernels/gemm/fp8_device.cuh"
#include "kernels/mlp/swiglu_fp8_kernels.h"

namespace tandem::kernels {
namespace {

__global__ void swiglu_fp8_kernel(const __nv_bfloat16* gate, int64_t ldg,
                                  const __nv_bfloat16* up, int64_t ldu, int64_t m, int64_t mp,
                                  int64_t n, bool vec_ok, uint8_t* q, float* scale) {
  const int lane = threadIdx.x % 32;
  const int64_t groups = (n + 127) / 128, items = mp * groups;
  const bool packed_ok = n % 4 == 0;
  for (int64_t item = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; item < items;
       item += int64_t{gridDim.x} * blockDim.x / 32) {
    const int64_t r = item / groups, g = item % groups;
    const int len = static_cast<int>(n - g * 128 < 128 ? n - g * 128 : 128);
    uint8_t* dst = q + r * n + g * 128;
    if (r >= m) {
      fp8_detail::ZeroGroup128(dst, len, lane);
      if (lane == 0) scale[g * mp + r] = 1.f;
      continue;
    }
    float gv[4], uv[4], v[4];
    fp8_detail::LoadGroup4(gate + r * ldg + g * 128, len, lane, vec_ok, gv);
    fp8_detail::LoadGroup4(up + r * ldu + g * 128, len, lane, vec_ok, uv);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      v[j] = lane * 4 + j < len
                 ? __bfloat162float(__float2bfloat16(gv[j] / (1.f + expf(-gv[j])) * uv[j]))
                 : 0.f;
    const float sc = fp8_detail::QuantizeGroup128(v, dst, len, lane, packed_ok);
    if (lane == 0) scale[g * mp + r] = sc;
  }
}

}  // namespace

cudaError_t LaunchSwiGluFp8(const void* gate, int64_t ldg, const void* up, int64_t ldu,
                            int64_t m, int64_t mp, int64_t n, uint8_t* q, float* scale,
                            cudaStream_t s) {
  const int64_t threads = mp * ((n + 127) / 128) * 32;
  int64_t blocks = (threads + 255) / 256;
  blocks = blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks);
  swiglu_fp8_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(
      static_cast<const __nv_bfloat16*>(gate), ldg, static_cast<const __nv_bfloat16*>(up), ldu,
      m, mp, n, fp8_detail::QuadAligned(gate, ldg) && fp8_detail::QuadAligned(up, ldu), q,
      scale);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
