// CUDA FP8 producers of hybrid_ops_fp8.h: the bf16 op's value in fp32 registers, rounded to
// bf16 once, then quantized per 1x128 group with kernels/gemm/fp8_device.cuh's helpers, so
// codes and scales are what QuantizeFp8Activation makes of the bf16 op's output.
//   tile kernel:  16-byte aligned rows and 8-column chunks that never straddle a head (the
//                 27B layers' case): fp8_detail::QuantizeRowTile, one half-warp per group
//                 and eight values per lane, every load issued before the math, scales
//                 staged in shared memory and stored coalesced. Serves the sigmoid gate
//                 (d % 8 == 0) and the gated norm with d == 128 (the half-warp's sum of
//                 squares is the head's).
// Otherwise one warp per group, four consecutive values per lane:
//   group kernel: one warp per (token, 128-column group), two groups per warp in flight
//                 (both loaded before either is reduced). Serves the sigmoid gate (any head
//                 width; 8-byte quad loads when a quad never straddles a head) and the gated
//                 norm when a head is exactly one group (d == 128: the warp's sum of squares
//                 is the head's).
//   row kernel:   the gated norm for other d: one block per token; its warps first compute
//                 every head's rstd into shared memory, then quantize the row's groups.
// Padding rows (T .. mp-1) get zero codes and scale 1.
#include <cuda_bf16.h>

#include "kernels/gemm/fp8_device.cuh"
#include "kernels/linear_attention/hybrid_ops_fp8_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kItemsPerWarp = 2;

// Fast exp and reciprocal, as hybrid_ops.cu's: within a few fp32 ulp of the IEEE forms.
__device__ __forceinline__ float Sigmoid(float x) { return __fdividef(1.f, 1.f + __expf(-x)); }
__device__ __forceinline__ float Silu(float x) { return x * Sigmoid(x); }
__device__ __forceinline__ float RoundBf16(float v) {
  return __bfloat162float(__float2bfloat16(v));
}

// Gated norm with d == 128: the group is the head. a: x, b: z.
struct GatedNormGroupOp {
  const bf16_t* x;
  int64_t x_stride;
  const bf16_t* z;
  int64_t z_stride;
  const bf16_t* w;
  float eps;
  bool vec;  // x, z and w quads are 8-byte aligned

  __device__ void Load(int64_t r, int64_t g, int lane, int len, float a[4], float b[4]) const {
    fp8_detail::LoadGroup4(x + r * x_stride + g * 128, len, lane, vec, a);
    fp8_detail::LoadGroup4(z + r * z_stride + g * 128, len, lane, vec, b);
  }
  // Warp-uniform: every lane of the warp calls it for the same group.
  __device__ void Finish(const float a[4], const float b[4], int lane, float v[4]) const {
    float wq[4];
    fp8_detail::LoadGroup4(w, 128, lane, vec, wq);
    float ss = a[0] * a[0] + a[1] * a[1] + a[2] * a[2] + a[3] * a[3];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float rstd = rsqrtf(ss / 128.f + eps);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = RoundBf16(a[j] * rstd * wq[j] * Silu(b[j]));
  }
};

// Sigmoid gate: column col of token r is element col % d of input row r * heads + col / d.
struct SigmoidGroupOp {
  const bf16_t* x;
  int64_t x_stride;
  const bf16_t* gate;
  int64_t gate_stride;
  int64_t heads;
  int d;
  bool vec;  // d % 4 == 0 and the quads are 8-byte aligned: a quad is one 8-byte load

  __device__ void Load(int64_t r, int64_t g, int lane, int len, float a[4], float b[4]) const {
    const int c0 = static_cast<int>(g * 128) + lane * 4;
    if (vec && lane * 4 + 4 <= len) {
      const int64_t row = r * heads + c0 / d;
      fp8_detail::LoadGroup4(x + row * x_stride + c0 % d, 4, 0, true, a);
      fp8_detail::LoadGroup4(gate + row * gate_stride + c0 % d, 4, 0, true, b);
      return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool in = lane * 4 + j < len;
      const int64_t row = r * heads + (c0 + j) / d, e = (c0 + j) % d;
      a[j] = in ? __bfloat162float(x[row * x_stride + e]) : 0.f;
      b[j] = in ? __bfloat162float(gate[row * gate_stride + e]) : 0.f;
    }
  }
  __device__ void Finish(const float a[4], const float b[4], int, float v[4]) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = RoundBf16(a[j] * Sigmoid(b[j]));
  }
};

// Row-tile producers (fp8_detail::QuantizeRowTile): columns c .. c+7 of token r.
struct GatedNormTileProducer {  // d == 128: the half-warp's group is one head
  struct Raw {
    uint4 x, z, w;
  };
  const bf16_t* x;
  int64_t x_stride;
  const bf16_t* z;
  int64_t z_stride;
  const bf16_t* w;
  float eps;

  __device__ __forceinline__ void Load(int64_t r, int64_t c, Raw& raw) const {
    raw.x = __ldg(reinterpret_cast<const uint4*>(x + r * x_stride + c));
    raw.z = __ldg(reinterpret_cast<const uint4*>(z + r * z_stride + c));
    raw.w = __ldg(reinterpret_cast<const uint4*>(w + c % 128));
  }
  // Reached by all 32 lanes (QuantizeRowTile calls it uniformly): the half-warp shuffles.
  __device__ __forceinline__ void Values(const Raw& raw, float v[8]) const {
    float a[8], b[8], wq[8];
    fp8_detail::Bf16x8ToFloat(raw.x, a);
    fp8_detail::Bf16x8ToFloat(raw.z, b);
    fp8_detail::Bf16x8ToFloat(raw.w, wq);
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += a[j] * a[j];
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float rstd = rsqrtf(ss / 128.f + eps);
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      v[j] = a[j] * rstd * wq[j] * Silu(b[j]);
      v[j + 1] = a[j + 1] * rstd * wq[j + 1] * Silu(b[j + 1]);
      fp8_detail::RoundToBf16(v[j], v[j + 1]);
    }
  }
};

struct SigmoidTileProducer {  // d % 8 == 0: a chunk lies in one head
  struct Raw {
    uint4 x, g;
  };
  const bf16_t* x;
  int64_t x_stride;
  const bf16_t* gate;
  int64_t gate_stride;
  int64_t heads;
  int64_t d;

  __device__ __forceinline__ void Load(int64_t r, int64_t c, Raw& raw) const {
    const int64_t row = r * heads + c / d, e = c % d;
    raw.x = __ldg(reinterpret_cast<const uint4*>(x + row * x_stride + e));
    raw.g = __ldg(reinterpret_cast<const uint4*>(gate + row * gate_stride + e));
  }
  __device__ __forceinline__ void Values(const Raw& raw, float v[8]) const {
    float a[8], b[8];
    fp8_detail::Bf16x8ToFloat(raw.x, a);
    fp8_detail::Bf16x8ToFloat(raw.g, b);
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      v[j] = a[j] * Sigmoid(b[j]);
      v[j + 1] = a[j + 1] * Sigmoid(b[j + 1]);
      fp8_detail::RoundToBf16(v[j], v[j + 1]);
    }
  }
};

// 16-row tiles, as swiglu_fp8.cu's.
constexpr int kTileItems = 2;

template <class Producer>
__global__ void __launch_bounds__(kThreads)
    tile_fp8_kernel(Producer p, int64_t m, int64_t mp, int64_t n, uint8_t* q, float* scale) {
  fp8_detail::QuantizeRowTile<kTileItems>(p, m, mp, n, q, scale);
}

template <class Producer>
cudaError_t LaunchTiles(const Producer& p, int64_t t, int64_t mp, int64_t n, uint8_t* q,
                        float* scale, Stream s) {
  tile_fp8_kernel<<<fp8_detail::RowTileBlocks(mp, n, kTileItems), kThreads, 0, s>>>(p, t, mp, n,
                                                                                   q, scale);
  return cudaGetLastError();
}

template <class Op>
__global__ void __launch_bounds__(kThreads)
    group_fp8_kernel(Op op, int64_t m, int64_t mp, int64_t k, uint8_t* q, float* scale) {
  const int lane = threadIdx.x % 32;
  const int64_t groups = (k + 127) / 128, items = mp * groups;
  const int64_t warp = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / 32;
  const bool packed_ok = k % 4 == 0 && reinterpret_cast<uintptr_t>(q) % 4 == 0;
  for (int64_t base = warp * kItemsPerWarp; base < items; base += warps * kItemsPerWarp) {
    float a[kItemsPerWarp][4], b[kItemsPerWarp][4];
#pragma unroll
    for (int u = 0; u < kItemsPerWarp; ++u) {
      const int64_t item = base + u, r = item / groups, g = item % groups;
      const int len = static_cast<int>(k - g * 128 < 128 ? k - g * 128 : 128);
      if (item < items && r < m) op.Load(r, g, lane, len, a[u], b[u]);
    }
#pragma unroll
    for (int u = 0; u < kItemsPerWarp; ++u) {
      const int64_t item = base + u, r = item / groups, g = item % groups;
      if (item >= items) break;
      const int len = static_cast<int>(k - g * 128 < 128 ? k - g * 128 : 128);
      uint8_t* dst = q + r * k + g * 128;
      if (r >= m) {
        fp8_detail::ZeroGroup128(dst, len, lane);
        if (lane == 0) scale[g * mp + r] = 1.f;
        continue;
      }
      float v[4];
      op.Finish(a[u], b[u], lane, v);
      const float sc = fp8_detail::QuantizeGroup128(v, dst, len, lane, packed_ok);
      if (lane == 0) scale[g * mp + r] = sc;
    }
  }
}

// Gated norm, any d: one block per token row; rstd of every head in shared memory.
__global__ void __launch_bounds__(kThreads)
    gated_norm_fp8_row_kernel(const bf16_t* x, int64_t x_stride, const bf16_t* z,
                              int64_t z_stride, const bf16_t* w, int64_t m, int64_t mp, int64_t k,
                              int64_t d, float eps, uint8_t* q, float* scale) {
  extern __shared__ float rstd[];  // [k / d]
  const int64_t r = blockIdx.x, groups = (k + 127) / 128;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (r >= m) {
    for (int64_t i = threadIdx.x; i < k; i += kThreads) q[r * k + i] = 0;
    for (int64_t g = threadIdx.x; g < groups; g += kThreads) scale[g * mp + r] = 1.f;
    return;
  }
  const bf16_t* xr = x + r * x_stride;
  const bf16_t* zr = z + r * z_stride;
  for (int64_t h = warp; h < k / d; h += kWarps) {
    float ss = 0.f;
    for (int64_t j = lane; j < d; j += 32) {
      const float v = __bfloat162float(xr[h * d + j]);
      ss += v * v;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) rstd[h] = rsqrtf(ss / static_cast<float>(d) + eps);
  }
  __syncthreads();
  const bool packed_ok = k % 4 == 0 && reinterpret_cast<uintptr_t>(q) % 4 == 0;
  for (int64_t g = warp; g < groups; g += kWarps) {
    const int len = static_cast<int>(k - g * 128 < 128 ? k - g * 128 : 128);
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = g * 128 + lane * 4 + j;
      v[j] = lane * 4 + j < len
                 ? RoundBf16(__bfloat162float(xr[c]) * rstd[c / d] * __bfloat162float(w[c % d]) *
                             Silu(__bfloat162float(zr[c])))
                 : 0.f;
    }
    const float sc = fp8_detail::QuantizeGroup128(v, q + r * k + g * 128, len, lane, packed_ok);
    if (lane == 0) scale[g * mp + r] = sc;
  }
}

template <class Op>
cudaError_t LaunchGroups(const Op& op, int64_t t, int64_t mp, int64_t k, uint8_t* q,
                         float* scale, Stream s) {
  const int64_t items = mp * ((k + 127) / 128), per_block = kWarps * kItemsPerWarp;
  const int64_t blocks = (items + per_block - 1) / per_block;
  group_fp8_kernel<<<static_cast<unsigned>(blocks < (1 << 30) ? blocks : (1 << 30)), kThreads, 0,
                     s>>>(op, t, mp, k, q, scale);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGatedRmsNormFp8(const void* x, int64_t x_stride, const void* z,
                                  int64_t z_stride, const void* w, int64_t t, int64_t cols,
                                  int64_t d, float eps, int64_t mp, uint8_t* q, float* scale,
                                  Stream s) {
  const auto* xb = static_cast<const bf16_t*>(x);
  const auto* zb = static_cast<const bf16_t*>(z);
  const auto* wb = static_cast<const bf16_t*>(w);
  if (d == 128 && fp8_detail::OctAligned(x, x_stride) && fp8_detail::OctAligned(z, z_stride) &&
      fp8_detail::OctAligned(w, 0)) {
    return LaunchTiles(GatedNormTileProducer{xb, x_stride, zb, z_stride, wb, eps}, t, mp, cols, q,
                       scale, s);
  }
  if (d == 128) {
    const bool vec = fp8_detail::QuadAligned(x, x_stride) && fp8_detail::QuadAligned(z, z_stride) &&
                     fp8_detail::QuadAligned(w, 0);
    return LaunchGroups(GatedNormGroupOp{xb, x_stride, zb, z_stride, wb, eps, vec}, t, mp, cols,
                        q, scale, s);
  }
  const size_t smem = static_cast<size_t>(cols / d) * sizeof(float);
  gated_norm_fp8_row_kernel<<<static_cast<unsigned>(mp), kThreads, smem, s>>>(
      xb, x_stride, zb, z_stride, wb, t, mp, cols, d, eps, q, scale);
  return cudaGetLastError();
}

cudaError_t LaunchSigmoidGateFp8(const void* x, int64_t x_stride, const void* gate,
                                 int64_t gate_stride, int64_t t, int64_t heads, int64_t d,
                                 int64_t mp, uint8_t* q, float* scale, Stream s) {
  if (d % 8 == 0 && fp8_detail::OctAligned(x, x_stride) &&
      fp8_detail::OctAligned(gate, gate_stride)) {
    return LaunchTiles(SigmoidTileProducer{static_cast<const bf16_t*>(x), x_stride,
                                           static_cast<const bf16_t*>(gate), gate_stride, heads,
                                           d},
                       t, mp, heads * d, q, scale, s);
  }
  const bool vec = d % 4 == 0 && fp8_detail::QuadAligned(x, x_stride) &&
                   fp8_detail::QuadAligned(gate, gate_stride);
  return LaunchGroups(SigmoidGroupOp{static_cast<const bf16_t*>(x), x_stride,
                                     static_cast<const bf16_t*>(gate), gate_stride, heads,
                                     static_cast<int>(d), vec},
                      t, mp, heads * d, q, scale, s);
}

}  // namespace tandem::kernels
