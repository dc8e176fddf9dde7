// CUDA fused SwiGLU recompute + backward. Algorithm: a grid-stride loop over (row, group of
// kVec columns), 16-byte loads when every row start is 16-byte aligned; per element the
// sigmoid is evaluated once (expf, as swiglu.cu) and feeds act, dgate and dup, so the three
// outputs are bitwise those of swiglu.cu's forward and backward kernels.
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/mlp/swiglu_fused_kernels.h"

namespace tandem::kernels {
namespace {

using cuda_detail::GridFor;
using cuda_detail::LoadVec;
using cuda_detail::Rows;
using cuda_detail::StoreVec;
using bf16_t = __nv_bfloat16;

// act, dgate, dup, dout, gate, up: [rows, cols]
template <int kVec>
__global__ void swiglu_recompute_bwd_kernel(Rows act, Rows dgate, Rows dup, Rows dout, Rows gate,
                                            Rows up, int64_t rows, int64_t cols) {
  const int64_t nv = cols / kVec, items = rows * nv;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < items;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = idx / nv, c = (idx % nv) * kVec;
    float d[kVec], g[kVec], u[kVec], o[kVec], dg[kVec], du[kVec];
    LoadVec<kVec>(dout.at(r, c), d);
    LoadVec<kVec>(gate.at(r, c), g);
    LoadVec<kVec>(up.at(r, c), u);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float sg = 1.f / (1.f + expf(-g[k]));
      o[k] = g[k] * sg * u[k];
      dg[k] = d[k] * u[k] * sg * (1.f + g[k] * (1.f - sg));
      du[k] = d[k] * g[k] * sg;
    }
    StoreVec<kVec>(act.at(r, c), o);
    StoreVec<kVec>(dgate.at(r, c), dg);
    StoreVec<kVec>(dup.at(r, c), du);
  }
}

Rows R(Bf16Rows m) { return Rows{static_cast<bf16_t*>(m.data), m.ld}; }

constexpr int kThreads = 256;

}  // namespace

cudaError_t LaunchSwiGluRecomputeBackward(Bf16Rows act, Bf16Rows dgate, Bf16Rows dup,
                                          Bf16Rows dout, Bf16Rows gate, Bf16Rows up,
                                          int64_t rows, int64_t cols, Stream s) {
  bool vec = cols % 8 == 0;
  for (const Bf16Rows& m : {act, dgate, dup, dout, gate, up})
    vec = vec && m.ld % 8 == 0 && cuda_detail::Aligned16({m.data});
  if (vec) {
    swiglu_recompute_bwd_kernel<8><<<GridFor(rows * cols / 8, kThreads), kThreads, 0, s>>>(
        R(act), R(dgate), R(dup), R(dout), R(gate), R(up), rows, cols);
  } else {
    swiglu_recompute_bwd_kernel<1><<<GridFor(rows * cols, kThreads), kThreads, 0, s>>>(
        R(act), R(dgate), R(dup), R(dout), R(gate), R(up), rows, cols);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels
