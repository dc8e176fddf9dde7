// CUDA row argmax. Algorithm: one block of 512 threads per row; each thread scans a strided
// slice keeping (value, index) with ties to the smaller index and NaN skipped, then a warp
// shuffle and a shared-memory step reduce the block's candidates with the same rule, so the
// result is the first maximum whatever the thread count.
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/elementwise/row_argmax_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 512;

struct Cand {
  float v;
  int64_t i;  // -1: no candidate (only NaN seen)
};

__device__ __forceinline__ Cand Better(Cand a, Cand b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

__device__ __forceinline__ float Load(const float* p) { return __ldg(p); }
__device__ __forceinline__ float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    row_argmax_kernel(int32_t* out, const T* x, int64_t v) {
  const T* row = x + int64_t{blockIdx.x} * v;
  Cand c{0.f, -1};
  for (int64_t j = threadIdx.x; j < v; j += kThreads) {
    const float f = Load(row + j);
    if (!isnan(f) && (c.i < 0 || f > c.v)) c = {f, j};  // j rises: ties keep the first
  }
  for (int off = 16; off > 0; off >>= 1) {
    Cand o{__shfl_down_sync(0xffffffffu, c.v, off),
           static_cast<int64_t>(__shfl_down_sync(0xffffffffu, static_cast<long long>(c.i), off))};
    c = Better(c, o);
  }
  __shared__ float vals[kThreads / 32];
  __shared__ int64_t idxs[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    vals[warp] = c.v;
    idxs[warp] = c.i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    Cand best{vals[0], idxs[0]};
    for (int w = 1; w < kThreads / 32; ++w) best = Better(best, {vals[w], idxs[w]});
    out[blockIdx.x] = static_cast<int32_t>(best.i < 0 ? 0 : best.i);
  }
}

}  // namespace

cudaError_t LaunchRowArgmax(int32_t* out, const void* x, DType dtype, int64_t rows, int64_t v,
                            Stream s) {
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(rows));
  if (dtype == DType::kF32)
    row_argmax_kernel<float><<<grid, kThreads, 0, s>>>(out, static_cast<const float*>(x), v);
  else
    row_argmax_kernel<__nv_bfloat16>
        <<<grid, kThreads, 0, s>>>(out, static_cast<const __nv_bfloat16*>(x), v);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
