// PhiloxUniformFill on the GPU: each thread makes one Philox block (four numbers) per step
// of a grid-stride loop; every element is the same function of (seed, offset, index) as in
// the CPU reference, so the bits match.
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/random/philox.h"
#include "kernels/random/philox_kernels.h"

namespace tandem::kernels {
namespace {

// out: f32 [n]
__global__ void philox_uniform_kernel(float* out, int64_t n, float lo, float scale, uint64_t seed,
                                      uint64_t offset) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < blocks;
       q += int64_t{gridDim.x} * blockDim.x) {
    Philox4 r = PhiloxBlock(seed, offset, static_cast<uint64_t>(q));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int64_t i = q * 4 + j;
      if (i < n) out[i] = PhiloxFma(scale, PhiloxToUniform01(r.v[j]), lo);
    }
  }
}

}  // namespace

cudaError_t LaunchPhiloxUniformFill(float* out, int64_t n, float lo, float hi, uint64_t seed,
                                    uint64_t offset, Stream s) {
  constexpr int kThreads = 256;
  philox_uniform_kernel<<<cuda_detail::GridFor((n + 3) / 4, kThreads), kThreads, 0, s>>>(
      out, n, lo, hi - lo, seed, offset);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
