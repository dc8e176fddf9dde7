// CUDA RMSNorm. Algorithm: a row is owned by a group of `group` threads; thread `lane` of the
// group owns vectors lane, lane + group, ... (at most kPer of them, kVec elements each) of
// every row it visits, so it loads the weight once and keeps its slice of x in registers
// between the sum of squares and the output. Groups of <= 32 threads (small H, e.g. per-head
// norms) reduce with warp shuffles and share a block; larger groups are a whole block.
// Backward accumulates dw for its columns in registers over all rows a block visits, writes
// one partial row per block (groups of a block combined in fixed order through shared
// memory), and a second kernel sums the partials in fixed order: deterministic, no atomics.
// Backward with H % 8 == 0, aligned pointers and 1024 <= H <= 4096 (the hidden norms) takes
// rmsnorm_bwd_pipe_kernel: a block streams its rows through a cp.async shared-memory ring
// (4 rows of x and dy in flight per block, ~3 blocks per SM), so loads overlap the per-row
// barrier instead of waiting behind it; it launches only as many blocks as are resident.
//
// Forward with H % 8 == 0, aligned pointers and H <= 4096 (the hidden and per-head norms)
// takes a leaner path, rmsnorm_fwd_group_kernel: a row belongs to `group` <= 32 threads
// (warp-shuffle sums only, no barrier), x stays packed in registers and the weight is re-read
// from L1 per row rather than held, so registers stay low enough for ~20 row-loads of 8 KB in
// flight per SM (the block kernel's 95 registers allowed ~5).
#include <algorithm>

#include "kernels/core/device_props.h"
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/norm/rmsnorm_kernels.h"

namespace tandem::kernels {
namespace {

using cuda_detail::Bf16Pack;
using cuda_detail::BlockSum;
using cuda_detail::GroupSum;
using cuda_detail::LoadPack;
using cuda_detail::StoreVec;
using bf16_t = __nv_bfloat16;

// A row is at most one block of this many threads (kRmsNormMaxH = kMaxThreads * kPer * kVec
// for both variants); the bound lets the compiler budget registers for it.
constexpr int kMaxThreads = 512;

// y: [rows, h], rstd: [rows] (nullable), x: [rows, h], w: [h]
template <int kVec, int kPer>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_fwd_kernel(bf16_t* y, float* rstd, const bf16_t* x, const bf16_t* w, int64_t rows,
                       int h, int group, float eps) {
  __shared__ float scratch[32];
  const int nvec = h / kVec, lane = threadIdx.x % group, sub = threadIdx.x / group;
  const int rpb = blockDim.x / group;
  Bf16Pack<kVec> wv[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (lane + k * group < nvec) wv[k] = LoadPack<kVec>(w + (lane + k * group) * kVec);
  for (int64_t base = int64_t{blockIdx.x} * rpb; base < rows; base += int64_t{gridDim.x} * rpb) {
    const int64_t row = base + sub;
    const bool valid = row < rows;
    Bf16Pack<kVec> xv[kPer];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = lane + k * group;
      if (valid && j < nvec) {
        xv[k] = LoadPack<kVec>(x + row * h + j * kVec);
#pragma unroll
        for (int i = 0; i < kVec; ++i) ss += xv[k][i] * xv[k][i];
      }
    }
    ss = group <= 32 ? GroupSum(ss, group) : BlockSum(ss, scratch);
    const float r = rsqrtf(ss / h + eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = lane + k * group;
      if (valid && j < nvec) {
        float o[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) o[i] = xv[k][i] * r * wv[k][i];
        StoreVec<kVec>(y + row * h + j * kVec, o);
      }
    }
    if (valid && lane == 0 && rstd != nullptr) rstd[row] = r;
  }
}

// y: [rows, h], rstd: [rows] (nullable), x: [rows, h], w: [h]; h % 8 == 0, 16-byte aligned,
// h / 8 <= group * kPer, group a power of two <= 32 dividing blockDim.x.
template <int kPer>
__global__ void __launch_bounds__(256)
    rmsnorm_fwd_group_kernel(bf16_t* y, float* rstd, const bf16_t* x, const bf16_t* w,
                             int64_t rows, int h, int group, float eps) {
  const int nvec = h / 8, lane = threadIdx.x % group, sub = threadIdx.x / group;
  const int rpb = blockDim.x / group;
  const uint4* w4 = reinterpret_cast<const uint4*>(w);
  // Every thread runs the same iterations (shuffles use the full mask); `valid` masks the tail.
  for (int64_t base = int64_t{blockIdx.x} * rpb; base < rows; base += int64_t{gridDim.x} * rpb) {
    const int64_t row = base + sub;
    const bool valid = row < rows;
    const uint4* xr = reinterpret_cast<const uint4*>(x + row * h);
    uint4 raw[kPer];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = lane + k * group;
      if (valid && j < nvec) {
        raw[k] = __ldcs(xr + j);  // streamed once: evict-first keeps w in L1
        const Bf16Pack<8>& xv = *reinterpret_cast<const Bf16Pack<8>*>(&raw[k]);
#pragma unroll
        for (int i = 0; i < 8; ++i) ss += xv[i] * xv[i];
      }
    }
    ss = GroupSum(ss, group);
    const float r = rsqrtf(ss / h + eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = lane + k * group;
      if (valid && j < nvec) {
        const Bf16Pack<8>& xv = *reinterpret_cast<const Bf16Pack<8>*>(&raw[k]);
        const uint4 wraw = __ldg(w4 + j);
        const Bf16Pack<8>& wv = *reinterpret_cast<const Bf16Pack<8>*>(&wraw);
        float o[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] = xv[i] * r * wv[i];
        StoreVec<8>(y + row * h + j * 8, o);
      }
    }
    if (valid && lane == 0 && rstd != nullptr) rstd[row] = r;
  }
}

// dx: [rows, h], partial: [gridDim.x, h], dy, x: [rows, h], w: [h], rstd: [rows]
template <int kVec, int kPer>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_bwd_kernel(bf16_t* dx, float* partial, const bf16_t* dy, const bf16_t* x,
                       const bf16_t* w, const float* rstd, int64_t rows, int h, int group) {
  extern __shared__ float combine[];  // [rpb, h] when rpb > 1
  __shared__ float scratch[32];
  const int nvec = h / kVec, lane = threadIdx.x % group, sub = threadIdx.x / group;
  const int rpb = blockDim.x / group;
  // w is re-read per row (an L1 hit) rather than held: registers go to acc and the row.
  float acc[kPer][kVec];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[k][i] = 0.f;
  for (int64_t base = int64_t{blockIdx.x} * rpb; base < rows; base += int64_t{gridDim.x} * rpb) {
    const int64_t row = base + sub;
    const bool valid = row < rows;
    Bf16Pack<kVec> xv[kPer], gv[kPer];
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = lane + k * group;
      if (valid && j < nvec) {
        xv[k] = LoadPack<kVec>(x + row * h + j * kVec);
        gv[k] = LoadPack<kVec>(dy + row * h + j * kVec);
      }
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = lane + k * group;
      if (valid && j < nvec) {
        const Bf16Pack<kVec> wv = LoadPack<kVec>(w + j * kVec);
#pragma unroll
        for (int i = 0; i < kVec; ++i) dot += gv[k][i] * wv[i] * xv[k][i];
      }
    }
    dot = group <= 32 ? GroupSum(dot, group) : BlockSum(dot, scratch);
    const float r = valid ? rstd[row] : 0.f;
    const float c = r * r * dot / h;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = lane + k * group;
      if (valid && j < nvec) {
        const Bf16Pack<kVec> wv = LoadPack<kVec>(w + j * kVec);
        float o[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          o[i] = r * (gv[k][i] * wv[i] - xv[k][i] * c);
          acc[k][i] += gv[k][i] * xv[k][i] * r;
        }
        StoreVec<kVec>(dx + row * h + j * kVec, o);
      }
    }
  }
  float* out = partial + int64_t{blockIdx.x} * h;
  if (rpb == 1) {
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (lane + k * group < nvec)
#pragma unroll
        for (int i = 0; i < kVec; ++i) out[(lane + k * group) * kVec + i] = acc[k][i];
    return;
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (lane + k * group < nvec)
#pragma unroll
      for (int i = 0; i < kVec; ++i) combine[sub * h + (lane + k * group) * kVec + i] = acc[k][i];
  __syncthreads();
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    float s = 0.f;
    for (int g = 0; g < rpb; ++g) s += combine[g * h + c];
    out[c] = s;
  }
}

// Pipelined backward for 16-byte-aligned rows with h % 8 == 0 and h <= kThreads * kPer * 8:
// one block of kThreads per row at a time (rows blockIdx.x, + gridDim.x, ...). Thread t owns
// vectors t, t + kThreads, ... of every row. Each thread copies exactly the x/dy vectors it
// later reads into a kStages-deep shared-memory ring with cp.async, so kStages rows (16 KB
// each at h = 4096) stay in flight per block with no barrier guarding the ring; only the
// per-row dot product crosses threads (BlockSum). rstd for a row is copied by thread 0 into
// a 2 * kStages ring, read by everyone after BlockSum's barrier (2 * kStages so the copy for
// row i + kStages cannot land while a slower thread still reads row i's slot).
// dx: [rows, h], partial: [gridDim.x, h], dy, x: [rows, h], w: [h], rstd: [rows]
// Min 3 blocks per SM: the ring (64 KB at h = 4096) allows 3 anyway, and the register budget
// it implies (80) avoids the spills ptxas chose at 64.
template <int kThreads, int kPer, int kStages>
__global__ void __launch_bounds__(kThreads, 3)
    rmsnorm_bwd_pipe_kernel(bf16_t* dx, float* partial, const bf16_t* dy, const bf16_t* x,
                            const bf16_t* w, const float* rstd, int64_t rows, int h) {
  extern __shared__ uint4 ring[];  // [kStages][2][h / 8]: x then dy
  __shared__ float scratch[32];
  __shared__ float rs[2 * kStages];
  const int nvec = h / 8, t = threadIdx.x;
  const uint4* w4 = reinterpret_cast<const uint4*>(w);
  // Issues the copies of row `row` (if it exists) into stage `st`, as one commit group.
  auto issue = [&](int64_t row, int st, int rslot) {
    if (row < rows) {
      uint4* sx = ring + int64_t{st} * 2 * nvec;
      const uint4* gx = reinterpret_cast<const uint4*>(x + row * h);
      const uint4* gd = reinterpret_cast<const uint4*>(dy + row * h);
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int j = t + k * kThreads;
        if (j < nvec) {
          const unsigned ax = static_cast<unsigned>(__cvta_generic_to_shared(sx + j));
          const unsigned ad = static_cast<unsigned>(__cvta_generic_to_shared(sx + nvec + j));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(ax), "l"(gx + j));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(ad), "l"(gd + j));
        }
      }
      if (t == 0) {
        const unsigned ar = static_cast<unsigned>(__cvta_generic_to_shared(rs + rslot));
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(ar), "l"(rstd + row));
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  float acc[kPer][8];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[k][i] = 0.f;
  const int64_t stride = gridDim.x;
  const int64_t n = (rows - blockIdx.x + stride - 1) / stride;  // rows of this block
#pragma unroll
  for (int s = 0; s < kStages; ++s) issue(blockIdx.x + s * stride, s, s);
  int st = 0, rslot = 0;  // it % kStages, it % (2 * kStages)
  for (int64_t it = 0; it < n; ++it) {
    const int64_t row = blockIdx.x + it * stride;
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1));
    const uint4* sx = ring + int64_t{st} * 2 * nvec;
    uint4 xr[kPer], gr[kPer];
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = t + k * kThreads;
      if (j < nvec) {
        xr[k] = sx[j];
        gr[k] = sx[nvec + j];
        const uint4 wraw = __ldg(w4 + j);
        const Bf16Pack<8>& xv = *reinterpret_cast<const Bf16Pack<8>*>(&xr[k]);
        const Bf16Pack<8>& gv = *reinterpret_cast<const Bf16Pack<8>*>(&gr[k]);
        const Bf16Pack<8>& wv = *reinterpret_cast<const Bf16Pack<8>*>(&wraw);
#pragma unroll
        for (int i = 0; i < 8; ++i) dot += gv[i] * wv[i] * xv[i];
      }
    }
    dot = BlockSum(dot, scratch);  // its barriers also publish thread 0's rs copy
    const float r = rs[rslot];
    const float c = r * r * dot / h;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = t + k * kThreads;
      if (j < nvec) {
        const uint4 wraw = __ldg(w4 + j);
        const Bf16Pack<8>& xv = *reinterpret_cast<const Bf16Pack<8>*>(&xr[k]);
        const Bf16Pack<8>& gv = *reinterpret_cast<const Bf16Pack<8>*>(&gr[k]);
        const Bf16Pack<8>& wv = *reinterpret_cast<const Bf16Pack<8>*>(&wraw);
        float o[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          o[i] = r * (gv[i] * wv[i] - xv[i] * c);
          acc[k][i] += gv[i] * xv[i] * r;
        }
        StoreVec<8>(dx + row * h + j * 8, o);
      }
    }
    // Stage st was read above (values consumed), so it can be refilled.
    issue(row + kStages * stride, st, rslot < kStages ? rslot + kStages : rslot - kStages);
    st = st + 1 == kStages ? 0 : st + 1;
    rslot = rslot + 1 == 2 * kStages ? 0 : rslot + 1;
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  float4* out = reinterpret_cast<float4*>(partial + int64_t{blockIdx.x} * h);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int j = t + k * kThreads;
    if (j < nvec) {
      out[2 * j] = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
      out[2 * j + 1] = make_float4(acc[k][4], acc[k][5], acc[k][6], acc[k][7]);
    }
  }
}

// dw: [h] += sum over p of partial: [p, h]. Block: 32 columns x 32 slices of p; a slice
// sums rows y, y + 32, ... with 4 independent accumulators (loads in flight), then the 32
// slice sums are added in a fixed tree order: deterministic.
__global__ void __launch_bounds__(1024)
    rmsnorm_dw_reduce_kernel(float* dw, const float* partial, int p, int h) {
  __shared__ float sums[32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
  if (c < h) {
    int i = threadIdx.y;
    for (; i + 96 < p; i += 128) {
      a0 += partial[int64_t{i} * h + c];
      a1 += partial[int64_t{i + 32} * h + c];
      a2 += partial[int64_t{i + 64} * h + c];
      a3 += partial[int64_t{i + 96} * h + c];
    }
    for (; i < p; i += 32) a0 += partial[int64_t{i} * h + c];
  }
  sums[threadIdx.y][threadIdx.x] = (a0 + a1) + (a2 + a3);
  __syncthreads();
  for (int half = 16; half > 0; half /= 2) {
    if (threadIdx.y < half) sums[threadIdx.y][threadIdx.x] += sums[threadIdx.y + half][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && c < h) dw[c] += sums[0][threadIdx.x];
}

// How a row is split over threads: `group` threads per row, each owning <= per vectors.
struct RowLayout {
  int group;    // threads per row
  int threads;  // per block
  int rpb;      // rows per block
};

RowLayout LayoutFor(int64_t h, int vec, int per) {
  const int64_t need = (h / vec + per - 1) / per;
  if (need <= 32) {
    int g = 1;
    while (g < need) g *= 2;
    return RowLayout{g, 256, 256 / g};
  }
  const int g = static_cast<int>((need + 31) / 32 * 32);  // <= kMaxThreads for h <= kRmsNormMaxH
  return RowLayout{g, g, 1};
}

template <int kVec, int kPer>
cudaError_t Forward(void* y, float* rstd, const void* x, const void* w, int64_t rows, int64_t h,
                    float eps, Stream s) {
  const RowLayout l = LayoutFor(h, kVec, kPer);
  if (l.threads > kMaxThreads) return cudaErrorInvalidValue;
  const int64_t blocks =
      std::min<int64_t>((rows + l.rpb - 1) / l.rpb, int64_t{CurrentDeviceSmCount()} * 16);
  rmsnorm_fwd_kernel<kVec, kPer><<<blocks, l.threads, 0, s>>>(
      static_cast<bf16_t*>(y), rstd, static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(w),
      rows, static_cast<int>(h), l.group, eps);
  return cudaGetLastError();
}

// Group kernel launch: the smallest power-of-two group (<= 32) giving each thread <= kPer
// vectors of 8; kThreads per block.
template <int kPer, int kThreads>
cudaError_t ForwardGroup(void* y, float* rstd, const void* x, const void* w, int64_t rows,
                         int64_t h, float eps, Stream s) {
  const int64_t need = (h / 8 + kPer - 1) / kPer;
  int group = 1;
  while (group < need) group *= 2;
  if (group > 32) return cudaErrorInvalidValue;
  const int rpb = kThreads / group;
  rmsnorm_fwd_group_kernel<kPer><<<cuda_detail::GridFor((rows + rpb - 1) / rpb, 1), kThreads, 0,
                                   s>>>(static_cast<bf16_t*>(y), rstd,
                                        static_cast<const bf16_t*>(x),
                                        static_cast<const bf16_t*>(w), rows, static_cast<int>(h),
                                        group, eps);
  return cudaGetLastError();
}

template <int kVec, int kPer>
cudaError_t Backward(void* dx, float* dw, const void* dy, const void* x, const void* w,
                     const float* rstd, float* workspace, int64_t workspace_rows, int64_t rows,
                     int64_t h, Stream s) {
  const RowLayout l = LayoutFor(h, kVec, kPer);
  if (l.threads > kMaxThreads || workspace_rows < 1) return cudaErrorInvalidValue;
  const int64_t blocks = std::min<int64_t>((rows + l.rpb - 1) / l.rpb, workspace_rows);
  const size_t smem = l.rpb > 1 ? sizeof(float) * l.rpb * h : 0;
  rmsnorm_bwd_kernel<kVec, kPer><<<blocks, l.threads, smem, s>>>(
      static_cast<bf16_t*>(dx), workspace, static_cast<const bf16_t*>(dy),
      static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(w), rstd, rows, static_cast<int>(h),
      l.group);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return LaunchRmsNormDwReduce(dw, workspace, blocks, h, s);
}

// Pipelined backward launch: as many blocks as fit on the device at once (so every block is
// resident and streams its rows), at most workspace_rows (one partial row each) and rows.
template <int kThreads, int kPer, int kStages>
cudaError_t BackwardPipe(void* dx, float* dw, const void* dy, const void* x, const void* w,
                         const float* rstd, float* workspace, int64_t workspace_rows,
                         int64_t rows, int64_t h, Stream s) {
  auto* kernel = rmsnorm_bwd_pipe_kernel<kThreads, kPer, kStages>;
  const int smem = kStages * 2 * static_cast<int>(h) * 2;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  const int sms = CurrentDeviceSmCount();
  int per_sm = 0;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem)) !=
      cudaSuccess)
    return e;
  const int64_t blocks =
      std::max<int64_t>(1, std::min({int64_t{sms} * std::max(per_sm, 1), workspace_rows, rows}));
  kernel<<<blocks, kThreads, smem, s>>>(static_cast<bf16_t*>(dx), workspace,
                                        static_cast<const bf16_t*>(dy),
                                        static_cast<const bf16_t*>(x),
                                        static_cast<const bf16_t*>(w), rstd, rows,
                                        static_cast<int>(h));
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return LaunchRmsNormDwReduce(dw, workspace, blocks, h, s);
}

}  // namespace

cudaError_t LaunchRmsNormForward(void* y, float* rstd, const void* x, const void* w, int64_t rows,
                                 int64_t h, float eps, Stream s) {
  if (h % 8 == 0 && cuda_detail::Aligned16({y, x, w})) {
    if (h <= 32 * 4 * 8) return ForwardGroup<4, 256>(y, rstd, x, w, rows, h, eps, s);
    if (h <= 32 * 16 * 8) return ForwardGroup<16, 128>(y, rstd, x, w, rows, h, eps, s);
    return Forward<8, 4>(y, rstd, x, w, rows, h, eps, s);
  }
  return Forward<1, 32>(y, rstd, x, w, rows, h, eps, s);
}

cudaError_t LaunchRmsNormBackward(void* dx, float* dw, const void* dy, const void* x, const void* w,
                                  const float* rstd, float* workspace, int64_t workspace_rows,
                                  int64_t rows, int64_t h, Stream s) {
  const bool vec = h % 8 == 0 && cuda_detail::Aligned16({dx, dy, x, w, workspace});
  if (vec && h >= 1024 && h <= 256 * 2 * 8 && workspace_rows >= 1)
    return BackwardPipe<256, 2, 4>(dx, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h, s);
  if (vec)
    return Backward<8, 4>(dx, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h, s);
  return Backward<1, 32>(dx, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h, s);
}

cudaError_t LaunchRmsNormDwReduce(float* dw, const float* partial, int64_t p, int64_t h,
                                  Stream s) {
  rmsnorm_dw_reduce_kernel<<<(h + 31) / 32, dim3(32, 32), 0, s>>>(
      dw, partial, static_cast<int>(p), static_cast<int>(h));
  return cudaGetLastError();
}

}  // namespace tandem::kernels
