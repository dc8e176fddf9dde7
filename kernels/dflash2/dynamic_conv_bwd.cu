// CUDA backward of the grouped dynamic causal convolution (dynamic_conv.h). One pass over
// x and dy (16-byte vectors, the tile geometry of dynamic_conv_common.cuh) writes
//   dx[t, c]    = sum_{k: t + k in t's block} dy[t + k, c] * (base[k, c] + d[t + k, k, g(c)])
//   dd[t, k, g] = sum_{c in g} dy[t, c] * x[t - k, c]          (0 when pos[t] < k)
// and accumulates dbase[k, c] += dy[t, c] * x[t - k, c] in registers over the thread's rows.
// dd's group sum: in-thread for group in {1, 2, 4}; in-thread then an xor-shuffle over the
// group / 8 lanes holding the group for group = 8 .. 256 (a power-of-two lane count dividing
// 32); any other group (or the unvectorized path) runs dd_generic_kernel, one thread per
// (row, tap, group) summing its channels in order. dbase: a block combines its kThreadsY rows
// of threads in a fixed order in shared memory and writes one partial [K, H] per row tile;
// dbase_reduce_kernel adds the tiles' partials in a fixed order. Bitwise deterministic.
#include "kernels/dflash2/dynamic_conv_common.cuh"

namespace tandem::kernels::dflash2 {
namespace {

using conv_detail::At;
using conv_detail::bf16_t;
using conv_detail::kMaxGridY;
using conv_detail::kRowsPerThread;
using conv_detail::kThreadsX;
using conv_detail::kThreadsY;
using conv_detail::MutAt;
using conv_detail::Packed;

// How the main kernel writes dd.
enum DdMode : int { kDdNone = 0, kDdInThread = 1, kDdShuffle = 2 };

// Row t's dd for every tap, from the products p[k][i] = dy[t, c0 + i] * x[t - k, c0 + i]
// (already 0 for taps before the block).
template <int kVec, int kTaps, int kDd>
__device__ __forceinline__ void WriteDd(const ConvArgs& a, ConvRows dd, int64_t t, int c0,
                                        bool active, const float (&p)[kTaps][kVec]) {
  if constexpr (kDd == kDdInThread) {
    // group in {1, 2, 4} (kVec == 8): 8 / group whole groups per thread. Pairwise sums with
    // compile-time indices (a runtime index would put p in local memory).
    static_assert(kVec == 8 || kDd != kDdInThread);
    if (!active) return;
#pragma unroll
    for (int k = 0; k < kTaps; ++k) {
      bf16_t* out = MutAt(dd, t, k * a.groups + c0 / a.group);
      float s2[4], s4[2];
#pragma unroll
      for (int j = 0; j < 4; ++j) s2[j] = p[k][2 * j] + p[k][2 * j + 1];
#pragma unroll
      for (int j = 0; j < 2; ++j) s4[j] = s2[2 * j] + s2[2 * j + 1];
      if (a.group == 1) {
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] = __float2bfloat16_rn(p[k][j]);
      } else if (a.group == 2) {
#pragma unroll
        for (int j = 0; j < 4; ++j) out[j] = __float2bfloat16_rn(s2[j]);
      } else {
#pragma unroll
        for (int j = 0; j < 2; ++j) out[j] = __float2bfloat16_rn(s4[j]);
      }
    }
  } else if constexpr (kDd == kDdShuffle) {
    const int lanes = a.group / kVec;  // 1 .. 32, a power of two; every lane takes part
#pragma unroll
    for (int k = 0; k < kTaps; ++k) {
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < kVec; ++i) sum += p[k][i];
      sum = cuda_detail::GroupSum(sum, lanes);
      if (active && (c0 / kVec) % lanes == 0)
        *MutAt(dd, t, k * a.groups + c0 / a.group) = __float2bfloat16_rn(sum);
    }
  }
}

// Writes this block's partial dbase for one row tile: the kThreadsY thread rows combined in
// order through shared memory.
template <int kVec, int kTaps>
__device__ __forceinline__ void WritePartial(const ConvArgs& a, float* partial, int64_t tile,
                                             int c0, bool active, float (&acc)[kTaps][kVec]) {
  __shared__ float stage[kThreadsY][kThreadsX * kVec];
#pragma unroll
  for (int k = 0; k < kTaps; ++k) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) stage[threadIdx.y][threadIdx.x * kVec + i] = acc[k][i];
    __syncthreads();
    if (threadIdx.y == 0 && active) {
      float out[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        out[i] = stage[0][threadIdx.x * kVec + i];
#pragma unroll
        for (int y = 1; y < kThreadsY; ++y) out[i] += stage[y][threadIdx.x * kVec + i];
      }
      float* dst = partial + (tile * kTaps + k) * a.hidden + c0;
#pragma unroll
      for (int i = 0; i < kVec; ++i) dst[i] = out[i];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[k][i] = 0.f;
  }
}

// Resident blocks per SM asked of the compiler (see FwdMinBlocks in dynamic_conv.cu). K = 2
// at 3 blocks (80 registers) spills ~30 bytes per thread (ptxas -v), which stays in L1;
// without the bound it takes 98 registers and 2 blocks. K = 3 takes 2 blocks, larger K 1.
constexpr int BwdMinBlocks(int taps) { return taps <= 2 ? 3 : taps == 3 ? 2 : 1; }

template <int kVec, int kTaps, int kDd>
__global__ void __launch_bounds__(kThreadsX* kThreadsY, BwdMinBlocks(kTaps))
    conv_bwd_kernel(ConvArgs a, ConvRows dx, ConvRows dd, ConvRows dy, ConvRows x,
                    const bf16_t* __restrict__ base, ConvRows d, float* __restrict__ partial) {
  // No early exit: lanes past H take part in the shuffles and the barriers with zeros.
  const int c0 = (blockIdx.x * kThreadsX + threadIdx.x) * kVec;
  const bool active = c0 < a.hidden;
  Packed<kVec> b[kTaps];
  float acc[kTaps][kVec];
#pragma unroll
  for (int k = 0; k < kTaps; ++k) {
    b[k].Load(base + k * a.hidden + c0, active);
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[k][i] = 0.f;
  }
  const int64_t tiles = (a.rows + kDynamicConvRowsPerBlock - 1) / kDynamicConvRowsPerBlock;
  for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const int64_t r0 = tile * kDynamicConvRowsPerBlock + threadIdx.y * kRowsPerThread;
    const int64_t r1 = r0 + kRowsPerThread < a.rows ? r0 + kRowsPerThread : a.rows;
    // xw[k] = x[t - k] and dyw[k] = dy[t + k] once row t's shifts are done.
    Packed<kVec> xw[kTaps], dyw[kTaps];
#pragma unroll
    for (int j = 0; j + 1 < kTaps; ++j) {
      xw[j].Load(At(x, r0 - 1 - j, c0), active && r0 < r1 && r0 - 1 - j >= 0);
      dyw[j + 1].Load(At(dy, r0 + j, c0), active && r0 < r1 && r0 + j < a.rows);
    }
    // The rows entering the windows at the next step, loaded one step ahead.
    Packed<kVec> next_x, next_dy;
    next_x.Load(At(x, r0, c0), active && r0 < r1);
    next_dy.Load(At(dy, r0 + kTaps - 1, c0), active && r0 < r1 && r0 + kTaps - 1 < a.rows);
    int pos = r0 < r1 ? static_cast<int>(r0 % a.block_size) : 0;
    for (int64_t t = r0; t < r1; ++t) {
      conv_detail::ShiftBack<kTaps>(xw);
      conv_detail::ShiftForward<kTaps>(dyw);
      xw[0] = next_x;
      dyw[kTaps - 1] = next_dy;
      next_x.Load(At(x, t + 1, c0), active && t + 1 < r1);
      next_dy.Load(At(dy, t + kTaps, c0), active && t + 1 < r1 && t + kTaps < a.rows);
      // dx[t]: taps k whose output row t + k is in t's block.
      float g[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) g[i] = 0.f;
#pragma unroll
      for (int k = 0; k < kTaps; ++k) {
        if (pos + k >= a.block_size || t + k >= a.rows) break;
        const bf16_t* dk = At(d, t + k, k * a.groups);
        if (!active) continue;      // g stays 0 and is not stored
        if (a.group % kVec == 0) {  // the thread's channels share one group
          const float dv = __bfloat162float(dk[c0 / a.group]);
#pragma unroll
          for (int i = 0; i < kVec; ++i) g[i] += dyw[k][i] * (b[k][i] + dv);
        } else {
#pragma unroll
          for (int i = 0; i < kVec; ++i)
            g[i] += dyw[k][i] * (b[k][i] + __bfloat162float(dk[(c0 + i) / a.group]));
        }
      }
      if (active) cuda_detail::StoreVec<kVec>(MutAt(dx, t, c0), g);
      // dbase and dd terms of row t.
      float p[kTaps][kVec];
#pragma unroll
      for (int k = 0; k < kTaps; ++k)
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          p[k][i] = k <= pos ? dyw[0][i] * xw[k][i] : 0.f;
          acc[k][i] += p[k][i];
        }
      WriteDd<kVec, kTaps, kDd>(a, dd, t, c0, active, p);
      pos = pos + 1 == a.block_size ? 0 : pos + 1;
    }
    WritePartial<kVec, kTaps>(a, partial, tile, c0, active, acc);
  }
}

// dd for any group: one thread per (row, tap, group), the group's channels summed in order.
__global__ void dd_generic_kernel(ConvArgs a, ConvRows dd, ConvRows dy, ConvRows x) {
  const int64_t per_row = int64_t{a.taps} * a.groups;
  const int64_t n = a.rows * per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / per_row;
    const int j = static_cast<int>(i % per_row), k = j / a.groups, g = j % a.groups;
    float sum = 0.f;
    if (t % a.block_size >= k) {
      const bf16_t* dyt = At(dy, t, int64_t{g} * a.group);
      const bf16_t* xs = At(x, t - k, int64_t{g} * a.group);
      for (int c = 0; c < a.group; ++c) sum += __bfloat162float(dyt[c]) * __bfloat162float(xs[c]);
    }
    *MutAt(dd, t, j) = __float2bfloat16_rn(sum);
  }
}

// dbase[col] += sum over tiles of partial[tile][col], col in [0, K * H): 32 columns x 8 tile
// slices per block, the slices combined in order.
__global__ void dbase_reduce_kernel(float* __restrict__ dbase, const float* __restrict__ partial,
                                    int64_t tiles, int64_t cols) {
  __shared__ float stage[8][33];
  const int64_t col = blockIdx.x * int64_t{32} + threadIdx.x;
  float sum = 0.f;
  if (col < cols)
    for (int64_t p = threadIdx.y; p < tiles; p += 8) sum += partial[p * cols + col];
  stage[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = stage[0][threadIdx.x];
    for (int y = 1; y < 8; ++y) total += stage[y][threadIdx.x];
    dbase[col] += total;
  }
}

template <int kVec, int kTaps, int kDd>
cudaError_t LaunchMain(const ConvArgs& a, ConvRows dx, ConvRows dd, ConvRows dy, ConvRows x,
                       const void* base, ConvRows d, float* partial, Stream s) {
  const int64_t vecs = (a.hidden + kVec - 1) / kVec;
  const int64_t tiles = (a.rows + kDynamicConvRowsPerBlock - 1) / kDynamicConvRowsPerBlock;
  const dim3 grid(static_cast<unsigned>((vecs + kThreadsX - 1) / kThreadsX),
                  static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
  conv_bwd_kernel<kVec, kTaps, kDd><<<grid, dim3(kThreadsX, kThreadsY), 0, s>>>(
      a, dx, dd, dy, x, static_cast<const bf16_t*>(base), d, partial);
  return cudaGetLastError();
}

// The dd mode the vectorized kernel can take for this group.
int DdModeFor(const ConvArgs& a) {
  if (!a.vectorized) return kDdNone;
  if (a.group == 1 || a.group == 2 || a.group == 4) return kDdInThread;
  const int lanes = a.group / 8;
  if (a.group % 8 == 0 && lanes <= 32 && 32 % lanes == 0) return kDdShuffle;
  return kDdNone;
}

template <int kTaps>
cudaError_t LaunchTaps(const ConvArgs& a, ConvRows dx, ConvRows dd, ConvRows dy, ConvRows x,
                       const void* base, ConvRows d, float* partial, Stream s) {
  if (!a.vectorized) return LaunchMain<1, kTaps, kDdNone>(a, dx, dd, dy, x, base, d, partial, s);
  switch (DdModeFor(a)) {
    case kDdInThread:
      return LaunchMain<8, kTaps, kDdInThread>(a, dx, dd, dy, x, base, d, partial, s);
    case kDdShuffle:
      return LaunchMain<8, kTaps, kDdShuffle>(a, dx, dd, dy, x, base, d, partial, s);
    default:
      return LaunchMain<8, kTaps, kDdNone>(a, dx, dd, dy, x, base, d, partial, s);
  }
}

cudaError_t LaunchMainAnyTaps(const ConvArgs& a, ConvRows dx, ConvRows dd, ConvRows dy, ConvRows x,
                              const void* base, ConvRows d, float* partial, Stream s) {
  switch (a.taps) {
    case 1:
      return LaunchTaps<1>(a, dx, dd, dy, x, base, d, partial, s);
    case 2:
      return LaunchTaps<2>(a, dx, dd, dy, x, base, d, partial, s);
    case 3:
      return LaunchTaps<3>(a, dx, dd, dy, x, base, d, partial, s);
    case 4:
      return LaunchTaps<4>(a, dx, dd, dy, x, base, d, partial, s);
    case 5:
      return LaunchTaps<5>(a, dx, dd, dy, x, base, d, partial, s);
    case 6:
      return LaunchTaps<6>(a, dx, dd, dy, x, base, d, partial, s);
    case 7:
      return LaunchTaps<7>(a, dx, dd, dy, x, base, d, partial, s);
    case 8:
      return LaunchTaps<8>(a, dx, dd, dy, x, base, d, partial, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchDynamicConvBackward(const ConvArgs& a, ConvRows dx, float* dbase, ConvRows dd,
                                      ConvRows dy, ConvRows x, const void* base, ConvRows d,
                                      float* partial, Stream s) {
  if (a.rows == 0) return cudaSuccess;
  cudaError_t e = LaunchMainAnyTaps(a, dx, dd, dy, x, base, d, partial, s);
  if (e != cudaSuccess) return e;
  if (DdModeFor(a) == kDdNone) {
    const int64_t n = a.rows * a.taps * a.groups;
    dd_generic_kernel<<<cuda_detail::GridFor(n, 256), 256, 0, s>>>(a, dd, dy, x);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  const int64_t tiles = (a.rows + kDynamicConvRowsPerBlock - 1) / kDynamicConvRowsPerBlock;
  const int64_t cols = int64_t{a.taps} * a.hidden;
  dbase_reduce_kernel<<<static_cast<unsigned>((cols + 31) / 32), dim3(32, 8), 0, s>>>(
      dbase, partial, tiles, cols);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::dflash2
