// CUDA block-scaled FP8 quantizers. Algorithms:
//   weight: one 256-thread block per 128x128 tile; each thread scans 64 elements of one
//     row for the amax, the block reduces it, then the same thread writes its 64 codes.
//   activation: bf16 with K % 8 == 0 and 16-byte aligned rows: row tiles
//     (fp8_detail::QuantizeRowTile: 32 rows x two groups per block, one half-warp per group,
//     eight values and one 16-byte load per lane, all loads before the math, scales stored
//     coalesced). Otherwise (f32, odd K or strides) the scalar fallback: one warp per
//     (row, 128-column group), four values per lane, grid-stride. Padding rows get zero
//     codes and scale 1.
//   dequantize: grid-stride elementwise.
//   transpose: 32x32 shared-memory tiles of codes; scales grid-stride.
#include <cuda_bf16.h>

#include "kernels/gemm/fp8_device.cuh"
#include "kernels/gemm/fp8_kernels.h"

namespace tandem::kernels {
namespace {

using fp8_detail::QuantizeGroup128;
using fp8_detail::ToE4m3;
using fp8_detail::WarpMax;

__device__ __forceinline__ float Load(const void* p, bool f32, int64_t i) {
  return f32 ? static_cast<const float*>(p)[i]
             : __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__global__ void quantize_fp8_weight_kernel(const void* w, bool f32, int64_t ldw, int64_t n,
                                           int64_t k, uint8_t* q, float* scale, int64_t lds) {
  __shared__ float warp_max[8];
  const int64_t nb = blockIdx.y, kb = blockIdx.x;
  const int64_t r = nb * 128 + threadIdx.x / 2;
  const int64_t c0 = kb * 128 + (threadIdx.x % 2) * 64;
  const int64_t c1 = c0 + 64 < k ? c0 + 64 : k;
  const bool row_ok = r < n;
  float amax = 0.f;
  if (row_ok)
    for (int64_t c = c0; c < c1; ++c) amax = fmaxf(amax, fabsf(Load(w, f32, r * ldw + c)));
  amax = WarpMax(amax);
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, warp_max[i]);
  const float sc = amax > 0.f ? amax / 448.f : 1.f;
  if (threadIdx.x == 0) {
    scale[nb * lds + kb] = sc;
    // The last K block of a row of blocks also zeroes the padding columns of the scales.
    if (kb == gridDim.x - 1)
      for (int64_t p = kb + 1; p < lds; ++p) scale[nb * lds + p] = 0.f;
  }
  if (row_ok)
    for (int64_t c = c0; c < c1; ++c) q[r * k + c] = ToE4m3(Load(w, f32, r * ldw + c) / sc);
}

struct Bf16Producer {
  struct Raw {
    uint4 x;
  };
  const __nv_bfloat16* x;
  int64_t ldx;

  __device__ __forceinline__ void Load(int64_t r, int64_t c, Raw& raw) const {
    raw.x = __ldg(reinterpret_cast<const uint4*>(x + r * ldx + c));
  }
  __device__ __forceinline__ void Values(const Raw& raw, float v[8]) const {
    fp8_detail::Bf16x8ToFloat(raw.x, v);
  }
};

constexpr int kActTileItems = 4;  // 32-row tiles: 64 bytes in flight per lane, 5 blocks/SM

template <int kItems>
__global__ void __launch_bounds__(256)
    quantize_fp8_act_tile_kernel(Bf16Producer p, int64_t m, int64_t mp, int64_t k, uint8_t* q,
                                 float* scale) {
  fp8_detail::QuantizeRowTile<kItems>(p, m, mp, k, q, scale);
}

__global__ void quantize_fp8_act_kernel(const void* x, bool f32, int64_t ldx, int64_t m,
                                        int64_t mp, int64_t k, uint8_t* q, float* scale) {
  const int lane = threadIdx.x % 32;
  const int64_t groups = (k + 127) / 128, items = mp * groups;
  const bool packed_ok = k % 4 == 0;
  for (int64_t item = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; item < items;
       item += int64_t{gridDim.x} * blockDim.x / 32) {
    const int64_t r = item / groups, g = item % groups;
    const int len = static_cast<int>(k - g * 128 < 128 ? k - g * 128 : 128);
    uint8_t* dst = q + r * k + g * 128;
    if (r >= m) {
      fp8_detail::ZeroGroup128(dst, len, lane);
      if (lane == 0) scale[g * mp + r] = 1.f;
      continue;
    }
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = lane * 4 + j;
      v[j] = c < len ? Load(x, f32, r * ldx + g * 128 + c) : 0.f;
    }
    const float sc = QuantizeGroup128(v, dst, len, lane, packed_ok);
    if (lane == 0) scale[g * mp + r] = sc;
  }
}

__global__ void dequantize_fp8_weight_kernel(const uint8_t* q, const float* scale, int64_t lds,
                                             int64_t n, int64_t k, void* out, bool f32) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * k;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / k, c = i % k;
    __nv_fp8_e4m3 code;
    code.__x = q[i];
    const float v = static_cast<float>(code) * scale[(r / 128) * lds + c / 128];
    if (f32) static_cast<float*>(out)[i] = v;
    else static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16(v);
  }
}

// 32x32 tiles of codes through shared memory (coalesced reads and writes); runs once per
// frozen weight, so a simple byte-wise tile is enough.
__global__ void transpose_fp8_kernel(const uint8_t* q, int64_t n, int64_t k, uint8_t* qt) {
  __shared__ uint8_t tile[32][33];
  const int64_t r0 = int64_t{blockIdx.y} * 32, c0 = int64_t{blockIdx.x} * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < n && c < k) tile[i][threadIdx.x] = q[r * k + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;  // output row c, column r
    if (r < n && c < k) qt[c * n + r] = tile[threadIdx.x][i];
  }
}

__global__ void transpose_fp8_scale_kernel(const float* scale, int64_t lds, int64_t nb,
                                           int64_t kb, float* scale_t, int64_t lds_t) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < kb * lds_t;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / lds_t, col = i % lds_t;  // scale_t[row = k block][col = n block]
    scale_t[i] = col < nb ? scale[col * lds + row] : 0.f;
  }
}

unsigned GridFor(int64_t threads_needed, int block) {
  int64_t g = (threads_needed + block - 1) / block;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535 * 8 ? 65535 * 8 : g));
}

}  // namespace

cudaError_t LaunchQuantizeFp8Weight(const void* w, bool w_is_f32, int64_t ldw, int64_t n,
                                    int64_t k, uint8_t* q, float* scale, int64_t lds,
                                    cudaStream_t s) {
  dim3 grid(static_cast<unsigned>((k + 127) / 128), static_cast<unsigned>((n + 127) / 128));
  quantize_fp8_weight_kernel<<<grid, 256, 0, s>>>(w, w_is_f32, ldw, n, k, q, scale, lds);
  return cudaGetLastError();
}

cudaError_t LaunchQuantizeFp8Activation(const void* x, bool x_is_f32, int64_t ldx, int64_t m,
                                        int64_t mp, int64_t k, uint8_t* q, float* scale,
                                        cudaStream_t s) {
  const auto* xb = static_cast<const __nv_bfloat16*>(x);
  if (!x_is_f32 && k % 8 == 0 && fp8_detail::OctAligned(xb, ldx)) {
    const unsigned blocks = fp8_detail::RowTileBlocks(mp, k, kActTileItems);
    quantize_fp8_act_tile_kernel<kActTileItems>
        <<<blocks, 256, 0, s>>>(Bf16Producer{xb, ldx}, m, mp, k, q, scale);
    return cudaGetLastError();
  }
  const int64_t warps = mp * ((k + 127) / 128);
  quantize_fp8_act_kernel<<<GridFor(warps * 32, 256), 256, 0, s>>>(x, x_is_f32, ldx, m, mp, k,
                                                                   q, scale);
  return cudaGetLastError();
}

cudaError_t LaunchTransposeFp8Weight(const uint8_t* q, const float* scale, int64_t lds,
                                     int64_t n, int64_t k, uint8_t* qt, float* scale_t,
                                     int64_t lds_t, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((k + 31) / 32), static_cast<unsigned>((n + 31) / 32));
  transpose_fp8_kernel<<<grid, dim3(32, 8), 0, s>>>(q, n, k, qt);
  const int64_t kb = (k + 127) / 128;
  transpose_fp8_scale_kernel<<<GridFor(kb * lds_t, 256), 256, 0, s>>>(scale, lds, (n + 127) / 128,
                                                                      kb, scale_t, lds_t);
  return cudaGetLastError();
}

cudaError_t LaunchDequantizeFp8Weight(const uint8_t* q, const float* scale, int64_t lds,
                                      int64_t n, int64_t k, void* out, bool out_is_f32,
                                      cudaStream_t s) {
  dequantize_fp8_weight_kernel<<<GridFor(n * k, 256), 256, 0, s>>>(q, scale, lds, n, k, out,
                                                                   out_is_f32);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
