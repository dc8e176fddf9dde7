// CUDA RMSNorm -> e4m3. Algorithm: one 256-thread block per row: the block reduces the sum
// of squares, then each warp takes 128-column groups (four values per lane, one 8-byte load
// where aligned), forms bf16(x * rstd * (weight_offset + w)) and quantizes the group
// (fp8_device.cuh). Padding rows are zeroed.
#include <cuda_bf16.h>

#include "kernels/gemm/fp8_device.cuh"
#include "kernels/norm/rmsnorm_fp8_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void rmsnorm_fp8_kernel(const __nv_bfloat16* x, int64_t ldx, const __nv_bfloat16* w,
                                   float weight_offset, int64_t m, int64_t mp, int64_t h, float eps, bool vec_ok,
                                   uint8_t* q, float* scale) {
  __shared__ float partial[kThreads / 32];
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t groups = (h + 127) / 128;
  if (r >= m) {
    for (int64_t i = threadIdx.x; i < h; i += kThreads) q[r * h + i] = 0;
    for (int64_t g = threadIdx.x; g < groups; g += kThreads) scale[g * mp + r] = 1.f;
    return;
  }
  const __nv_bfloat16* xr = x + r * ldx;
  // Both passes give warp `warp` the groups warp, warp + 8, ...: the second re-reads what the
  // first loaded (from L1), and every lane loads its quad as one 8-byte load.
  float ss = 0.f;
  for (int64_t g = warp; g < groups; g += kThreads / 32) {
    const int len = static_cast<int>(h - g * 128 < 128 ? h - g * 128 : 128);
    float v[4];
    fp8_detail::LoadGroup4(xr + g * 128, len, lane, vec_ok, v);
    ss += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  ss = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) ss += partial[i];
  const float rstd = rsqrtf(ss / h + eps);
  const bool packed_ok = h % 4 == 0;
  for (int64_t g = warp; g < groups; g += kThreads / 32) {
    const int len = static_cast<int>(h - g * 128 < 128 ? h - g * 128 : 128);
    float xv[4], wv[4], v[4];
    fp8_detail::LoadGroup4(xr + g * 128, len, lane, vec_ok, xv);
    fp8_detail::LoadGroup4(w + g * 128, len, lane, vec_ok, wv);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      v[j] = lane * 4 + j < len
                 ? __bfloat162float(__float2bfloat16(xv[j] * rstd * (weight_offset + wv[j])))
                 : 0.f;
    const float sc = fp8_detail::QuantizeGroup128(v, q + r * h + g * 128, len, lane, packed_ok);
    if (lane == 0) scale[g * mp + r] = sc;
  }
}

}  // namespace

cudaError_t LaunchRmsNormFp8(const void* x, int64_t ldx, const void* w, float weight_offset,
                             int64_t m, int64_t mp, int64_t h, float eps, uint8_t* q,
                             float* scale, cudaStream_t s) {
  rmsnorm_fp8_kernel<<<static_cast<unsigned>(mp), kThreads, 0, s>>>(
      static_cast<const __nv_bfloat16*>(x), ldx, static_cast<const __nv_bfloat16*>(w),
      weight_offset, m, mp, h,
      eps, fp8_detail::QuadAligned(x, ldx) && fp8_detail::QuadAligned(w, 0), q, scale);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
