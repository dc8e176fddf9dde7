// CUDA SwiGLU. Algorithm: a grid-stride loop over (row, group of kVec columns) with 16-byte
// loads when every row start is 16-byte aligned; fp32 math (expf-based sigmoid), one
// rounding per output.
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/mlp/swiglu_kernels.h"

namespace tandem::kernels {
namespace {

using cuda_detail::GridFor;
using cuda_detail::LoadVec;
using cuda_detail::Rows;
using cuda_detail::StoreVec;
using bf16_t = __nv_bfloat16;

__device__ __forceinline__ float Sigmoid(float g) { return 1.f / (1.f + expf(-g)); }

// out, gate, up: [rows, cols]
template <int kVec>
__global__ void swiglu_fwd_kernel(Rows out, Rows gate, Rows up, int64_t rows, int64_t cols) {
  const int64_t nv = cols / kVec, items = rows * nv;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < items;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = idx / nv, c = (idx % nv) * kVec;
    float g[kVec], u[kVec], o[kVec];
    LoadVec<kVec>(gate.at(r, c), g);
    LoadVec<kVec>(up.at(r, c), u);
#pragma unroll
    for (int k = 0; k < kVec; ++k) o[k] = g[k] * Sigmoid(g[k]) * u[k];
    StoreVec<kVec>(out.at(r, c), o);
  }
}

// dgate, dup, dout, gate, up: [rows, cols]
template <int kVec>
__global__ void swiglu_bwd_kernel(Rows dgate, Rows dup, Rows dout, Rows gate, Rows up, int64_t rows,
                                  int64_t cols) {
  const int64_t nv = cols / kVec, items = rows * nv;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < items;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = idx / nv, c = (idx % nv) * kVec;
    float d[kVec], g[kVec], u[kVec], dg[kVec], du[kVec];
    LoadVec<kVec>(dout.at(r, c), d);
    LoadVec<kVec>(gate.at(r, c), g);
    LoadVec<kVec>(up.at(r, c), u);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float sg = Sigmoid(g[k]);
      dg[k] = d[k] * u[k] * sg * (1.f + g[k] * (1.f - sg));
      du[k] = d[k] * g[k] * sg;
    }
    StoreVec<kVec>(dgate.at(r, c), dg);
    StoreVec<kVec>(dup.at(r, c), du);
  }
}

Rows R(Bf16Rows m) { return Rows{static_cast<bf16_t*>(m.data), m.ld}; }

// Vector path: 8 columns per item, every row start 16-byte aligned.
bool Vectorisable(std::initializer_list<Bf16Rows> ms, int64_t cols) {
  if (cols % 8 != 0) return false;
  for (const Bf16Rows& m : ms)
    if (m.ld % 8 != 0 || !cuda_detail::Aligned16({m.data})) return false;
  return true;
}

constexpr int kThreads = 256;

}  // namespace

cudaError_t LaunchSwiGluForward(Bf16Rows out, Bf16Rows gate, Bf16Rows up, int64_t rows,
                                int64_t cols, Stream s) {
  if (Vectorisable({out, gate, up}, cols)) {
    swiglu_fwd_kernel<8><<<GridFor(rows * cols / 8, kThreads), kThreads, 0, s>>>(R(out), R(gate),
                                                                                 R(up), rows, cols);
  } else {
    swiglu_fwd_kernel<1>
        <<<GridFor(rows * cols, kThreads), kThreads, 0, s>>>(R(out), R(gate), R(up), rows, cols);
  }
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluBackward(Bf16Rows dgate, Bf16Rows dup, Bf16Rows dout, Bf16Rows gate,
                                 Bf16Rows up, int64_t rows, int64_t cols, Stream s) {
  if (Vectorisable({dgate, dup, dout, gate, up}, cols)) {
    swiglu_bwd_kernel<8><<<GridFor(rows * cols / 8, kThreads), kThreads, 0, s>>>(
        R(dgate), R(dup), R(dout), R(gate), R(up), rows, cols);
  } else {
    swiglu_bwd_kernel<1><<<GridFor(rows * cols, kThreads), kThreads, 0, s>>>(
        R(dgate), R(dup), R(dout), R(gate), R(up), rows, cols);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels
