// CUDA SwiGLU -> e4m3. Each value is bf16(silu(g) * u) (fp32 math with expf and IEEE division,
// one rounding, as swiglu.cu), quantized per 128-column group (fp8_device.cuh).
// Algorithm: with 16-byte aligned gate/up rows and I % 8 == 0, row tiles
// (fp8_detail::QuantizeRowTile: 16 rows x two groups per 256-thread block, one half-warp per
// group, eight values and two 16-byte loads per lane, every load issued before the math,
// scales staged in shared memory and stored coalesced). Otherwise the scalar fallback: one
// warp per (row, group), grid-stride, four values per lane. Padding rows get zero codes and
// scale 1 on both paths.
#include <cuda_bf16.h>

#include "kernels/gemm/fp8_device.cuh"
#include "kernels/mlp/swiglu_fp8_kernels.h"

namespace tandem::kernels {
namespace {

__device__ __forceinline__ float SwiGluValue(float g, float u) {
  return g / (1.f + expf(-g)) * u;
}

struct SwiGluProducer {
  struct Raw {
    uint4 g, u;
  };
  const __nv_bfloat16* gate;
  int64_t ldg;
  const __nv_bfloat16* up;
  int64_t ldu;

  __device__ __forceinline__ void Load(int64_t r, int64_t c, Raw& raw) const {
    raw.g = __ldg(reinterpret_cast<const uint4*>(gate + r * ldg + c));
    raw.u = __ldg(reinterpret_cast<const uint4*>(up + r * ldu + c));
  }
  __device__ __forceinline__ void Values(const Raw& raw, float v[8]) const {
    float g[8], u[8];
    fp8_detail::Bf16x8ToFloat(raw.g, g);
    fp8_detail::Bf16x8ToFloat(raw.u, u);
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      v[j] = SwiGluValue(g[j], u[j]);
      v[j + 1] = SwiGluValue(g[j + 1], u[j + 1]);
      fp8_detail::RoundToBf16(v[j], v[j + 1]);
    }
  }
};

// 16-row tiles: 64 bytes of gate/up in flight per lane, and few enough registers for six
// blocks per multiprocessor.
constexpr int kTileItems = 2;

template <int kItems>
__global__ void __launch_bounds__(256)
    swiglu_fp8_tile_kernel(SwiGluProducer p, int64_t m, int64_t mp, int64_t n, uint8_t* q,
                           float* scale) {
  fp8_detail::QuantizeRowTile<kItems>(p, m, mp, n, q, scale);
}

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
      v[j] = lane * 4 + j < len ? __bfloat162float(__float2bfloat16(SwiGluValue(gv[j], uv[j])))
                                : 0.f;
    const float sc = fp8_detail::QuantizeGroup128(v, dst, len, lane, packed_ok);
    if (lane == 0) scale[g * mp + r] = sc;
  }
}

}  // namespace

cudaError_t LaunchSwiGluFp8(const void* gate, int64_t ldg, const void* up, int64_t ldu,
                            int64_t m, int64_t mp, int64_t n, uint8_t* q, float* scale,
                            cudaStream_t s) {
  const auto* g = static_cast<const __nv_bfloat16*>(gate);
  const auto* u = static_cast<const __nv_bfloat16*>(up);
  if (n % 8 == 0 && fp8_detail::OctAligned(g, ldg) && fp8_detail::OctAligned(u, ldu)) {
    const unsigned blocks = fp8_detail::RowTileBlocks(mp, n, kTileItems);
    swiglu_fp8_tile_kernel<kTileItems>
        <<<blocks, 256, 0, s>>>(SwiGluProducer{g, ldg, u, ldu}, m, mp, n, q, scale);
    return cudaGetLastError();
  }
  const int64_t threads = mp * ((n + 127) / 128) * 32;
  int64_t blocks = (threads + 255) / 256;
  blocks = blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks);
  const bool vec_ok = fp8_detail::QuadAligned(gate, ldg) && fp8_detail::QuadAligned(up, ldu);
  swiglu_fp8_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(g, ldg, u, ldu, m, mp, n,
                                                                   vec_ok, q, scale);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
