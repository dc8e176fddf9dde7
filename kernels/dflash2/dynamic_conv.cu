// CUDA forward of the grouped dynamic causal convolution (dynamic_conv.h). Memory-bound: each
// element of x and y moves once (plus K - 1 halo rows per 16-row strip), in 16-byte vectors;
// base stays in registers; d (K*G per row, 1/group of x's size per tap) is read per row and
// group from L1. Tile geometry: dynamic_conv_common.cuh. The conv sums taps in increasing k
// in fp32 (as the CPU version), then adds y's old value when accumulating, one rounding.
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

// Resident blocks per SM asked of the compiler: memory-bound, so occupancy is what keeps
// enough loads in flight. K = 2 fits the budget of 4 blocks (64 registers) without spilling
// on the group % 8 == 0 path (ptxas -v); K = 3 takes 3 blocks (85), larger K 2.
constexpr int FwdMinBlocks(int taps) { return taps <= 2 ? 4 : taps == 3 ? 3 : 2; }

// kOneGroup: the kVec channels of a thread share one group (group % kVec == 0): one d load
// per tap instead of one per channel.
template <int kVec, int kTaps, bool kOneGroup>
__global__ void __launch_bounds__(kThreadsX* kThreadsY, FwdMinBlocks(kTaps))
    conv_fwd_kernel(ConvArgs a, ConvRows y, ConvRows x, const bf16_t* __restrict__ base, ConvRows d,
                    bool accumulate) {
  const int c0 = (blockIdx.x * kThreadsX + threadIdx.x) * kVec;
  if (c0 >= a.hidden) return;
  Packed<kVec> b[kTaps];
#pragma unroll
  for (int k = 0; k < kTaps; ++k) b[k].Load(base + k * a.hidden + c0, true);
  const int64_t tiles = (a.rows + kDynamicConvRowsPerBlock - 1) / kDynamicConvRowsPerBlock;
  for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const int64_t r0 = tile * kDynamicConvRowsPerBlock + threadIdx.y * kRowsPerThread;
    const int64_t r1 = r0 + kRowsPerThread < a.rows ? r0 + kRowsPerThread : a.rows;
    if (r0 >= r1) continue;
    Packed<kVec> xw[kTaps];  // xw[k] = x[t - k] once row t's shift is done
#pragma unroll
    for (int j = 0; j + 1 < kTaps; ++j) xw[j].Load(At(x, r0 - 1 - j, c0), r0 - 1 - j >= 0);
    Packed<kVec> next;
    next.Load(At(x, r0, c0), true);
    int pos = static_cast<int>(r0 % a.block_size);
    for (int64_t t = r0; t < r1; ++t) {
      conv_detail::ShiftBack<kTaps>(xw);
      xw[0] = next;
      next.Load(At(x, t + 1, c0), t + 1 < r1);  // one row ahead
      Packed<kVec> old;                         // y's value when accumulating, loaded early
      old.Load(At(y, t, c0), accumulate);
      float acc[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[i] = 0.f;
      const bf16_t* dt = At(d, t, 0);
#pragma unroll
      for (int k = 0; k < kTaps; ++k) {
        if (k > pos) break;
        if constexpr (kOneGroup) {
          const float dv = __bfloat162float(dt[k * a.groups + c0 / a.group]);
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc[i] += (b[k][i] + dv) * xw[k][i];
        } else {
#pragma unroll
          for (int i = 0; i < kVec; ++i)
            acc[i] +=
                (b[k][i] + __bfloat162float(dt[k * a.groups + (c0 + i) / a.group])) * xw[k][i];
        }
      }
      if (accumulate) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[i] = old[i] + acc[i];
      }
      cuda_detail::StoreVec<kVec>(MutAt(y, t, c0), acc);
      pos = pos + 1 == a.block_size ? 0 : pos + 1;
    }
  }
}

template <int kVec, int kTaps, bool kOneGroup>
cudaError_t Launch(const ConvArgs& a, ConvRows y, ConvRows x, const void* base, ConvRows d,
                   bool accumulate, Stream s) {
  const int64_t vecs = (a.hidden + kVec - 1) / kVec;
  const int64_t tiles = (a.rows + kDynamicConvRowsPerBlock - 1) / kDynamicConvRowsPerBlock;
  const dim3 grid(static_cast<unsigned>((vecs + kThreadsX - 1) / kThreadsX),
                  static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
  conv_fwd_kernel<kVec, kTaps, kOneGroup><<<grid, dim3(kThreadsX, kThreadsY), 0, s>>>(
      a, y, x, static_cast<const bf16_t*>(base), d, accumulate);
  return cudaGetLastError();
}

template <int kTaps>
cudaError_t LaunchTaps(const ConvArgs& a, ConvRows y, ConvRows x, const void* base, ConvRows d,
                       bool accumulate, Stream s) {
  if (!a.vectorized) return Launch<1, kTaps, true>(a, y, x, base, d, accumulate, s);
  if (a.group % 8 == 0) return Launch<8, kTaps, true>(a, y, x, base, d, accumulate, s);
  return Launch<8, kTaps, false>(a, y, x, base, d, accumulate, s);
}

}  // namespace

cudaError_t LaunchDynamicConvForward(const ConvArgs& a, ConvRows y, ConvRows x, const void* base,
                                     ConvRows d, bool accumulate, Stream s) {
  if (a.rows == 0) return cudaSuccess;
  switch (a.taps) {
    case 1:
      return LaunchTaps<1>(a, y, x, base, d, accumulate, s);
    case 2:
      return LaunchTaps<2>(a, y, x, base, d, accumulate, s);
    case 3:
      return LaunchTaps<3>(a, y, x, base, d, accumulate, s);
    case 4:
      return LaunchTaps<4>(a, y, x, base, d, accumulate, s);
    case 5:
      return LaunchTaps<5>(a, y, x, base, d, accumulate, s);
    case 6:
      return LaunchTaps<6>(a, y, x, base, d, accumulate, s);
    case 7:
      return LaunchTaps<7>(a, y, x, base, d, accumulate, s);
    case 8:
      return LaunchTaps<8>(a, y, x, base, d, accumulate, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace tandem::kernels::dflash2
