// CUDA conv step of Gated DeltaNet decoding (decode_step.h): one thread per (row, channel) of
// max(n, R) rows; a thread computes out[row] (row < n) from the K taps of [state; x] and copies
// cat row (K-1+n-R+row) into history[row] (row < R). Warps read consecutive channels
// (coalesced). The delta rule step is the recurrent kernel's decode variant
// (gated_delta_rule.cu).
#include <cuda_bf16.h>

#include "kernels/linear_attention/decode_step_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
constexpr int kThreads = 256;

__device__ float Silu(float x) { return x * (1.f / (1.f + expf(-x))); }

__global__ void conv_step_kernel(bf16_t* out, int64_t out_stride, bf16_t* history, int64_t r,
                                 const bf16_t* x, int64_t x_stride, const bf16_t* state,
                                 const bf16_t* w, int64_t n, int64_t c, int64_t k) {
  const int64_t ch = int64_t{blockIdx.x} * blockDim.x + threadIdx.x, row = blockIdx.y;
  if (ch >= c) return;
  auto cat = [&](int64_t i) {  // row i of [state; x]
    return i < k - 1 ? state[i * c + ch] : x[(i - (k - 1)) * x_stride + ch];
  };
  if (row < n) {
    float acc = 0.f;
    for (int64_t j = 0; j < k; ++j)
      acc += __bfloat162float(w[ch * k + j]) * __bfloat162float(cat(row + j));
    out[row * out_stride + ch] = __float2bfloat16(Silu(acc));
  }
  if (row < r) history[row * c + ch] = cat(k - 1 + n - r + row);
}

}  // namespace

cudaError_t LaunchCausalConv1dSiluStep(void* out, int64_t out_stride, void* history, int64_t r,
                                       const void* x, int64_t x_stride, const void* state,
                                       const void* w, int64_t n, int64_t c, int64_t k, Stream s) {
  const dim3 grid(static_cast<unsigned>((c + kThreads - 1) / kThreads),
                  static_cast<unsigned>(n > r ? n : r));
  conv_step_kernel<<<grid, kThreads, 0, s>>>(
      static_cast<bf16_t*>(out), out_stride, static_cast<bf16_t*>(history), r,
      static_cast<const bf16_t*>(x), x_stride, static_cast<const bf16_t*>(state),
      static_cast<const bf16_t*>(w), n, c, k);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
