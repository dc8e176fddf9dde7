// CUDA concat + uniform noise. Algorithm: the output is k * tokens segments of h elements,
// segment (t, i) = out[t, i*h : (i+1)*h] = row t of input i, which starts at output element
// (t * k + i) * h. Block row blockIdx.y = input i; blocks stride over tokens t; a block's
// threads cover the segment in vectors of kVec elements (kVec = 8 when H % 8 == 0 and the
// pointers are aligned: 16-byte loads and stores, two Philox blocks per vector), kUnroll
// vectors per thread loaded before any is written. No 64-bit division in the loop: Philox
// (about 40 integer multiply-adds per 4 outputs) already makes this kernel integer-bound.
// Noise uses __fmul_rn/__fadd_rn so no FMA contraction changes the bits versus the CPU.
#include <algorithm>

#include "kernels/core/device_props.h"
#include "kernels/elementwise/concat_noise_kernels.h"
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/random/philox.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;

struct Inputs {
  const bf16_t* x[16];
};

// v: kVec elements starting at output element e0 (a multiple of 4 when kVec % 4 == 0).
template <int kVec>
__device__ __forceinline__ void AddNoise(float (&v)[kVec], int64_t e0, float noise_std,
                                         uint64_t seed, uint64_t offset) {
  if constexpr (kVec % 4 == 0) {  // whole Philox blocks
#pragma unroll
    for (int b = 0; b < kVec / 4; ++b) {
      const Philox4 r = PhiloxBlock(seed, offset, static_cast<uint64_t>(e0 / 4 + b));
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[4 * b + j] = __fadd_rn(v[4 * b + j], __fmul_rn(noise_std, PhiloxToUniformSym(r.v[j])));
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const uint64_t e = static_cast<uint64_t>(e0 + j);
      const float u = PhiloxToUniformSym(PhiloxBlock(seed, offset, e >> 2).v[e & 3]);
      v[j] = __fadd_rn(v[j], __fmul_rn(noise_std, u));
    }
  }
}

// out: [tokens, k * h]; in.x[i]: [tokens, h]; gridDim.y == k.
template <int kVec, int kUnroll>
__global__ void concat_noise_kernel(bf16_t* out, Inputs in, int k, int64_t tokens, int64_t h,
                                    float noise_std, uint64_t seed, uint64_t offset) {
  const int i = blockIdx.y;
  const int64_t nv = h / kVec, span = int64_t{kUnroll} * blockDim.x;
  const bf16_t* x = in.x[i];
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t seg = (t * k + i) * h;  // first output element of segment (t, i)
    for (int64_t base = threadIdx.x; base < nv; base += span) {
      float v[kUnroll][kVec];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = base + int64_t{u} * blockDim.x;
        if (c < nv) cuda_detail::LoadVec<kVec>(x + t * h + c * kVec, v[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = base + int64_t{u} * blockDim.x;
        if (c < nv) {
          if (noise_std > 0.f) AddNoise<kVec>(v[u], seg + c * kVec, noise_std, seed, offset);
          cuda_detail::StoreVec<kVec>(out + seg + c * kVec, v[u]);
        }
      }
    }
  }
}

}  // namespace

cudaError_t LaunchConcatNoise(void* out, const void* const* inputs, int k, int64_t tokens,
                              int64_t h, float noise_std, uint64_t seed, uint64_t offset,
                              Stream s) {
  if (k < 1 || k > 16) return cudaErrorInvalidValue;
  Inputs in{};
  bool aligned = cuda_detail::Aligned16({out});
  for (int i = 0; i < k; ++i) {
    in.x[i] = static_cast<const bf16_t*>(inputs[i]);
    aligned = aligned && cuda_detail::Aligned16({inputs[i]});
  }
  constexpr int kThreads = 256;
  auto* o = static_cast<bf16_t*>(out);
  // About two waves of blocks in all (SMs x 8 resident blocks of 256 threads), split over
  // the k inputs; blocks stride over the tokens.
  const unsigned bx = static_cast<unsigned>(
      std::min<int64_t>(tokens, std::max(1, CurrentDeviceSmCount() * 16 / k)));
  const dim3 grid(bx, static_cast<unsigned>(k));
  if (h % 8 == 0 && aligned) {
    concat_noise_kernel<8, 2><<<grid, kThreads, 0, s>>>(o, in, k, tokens, h, noise_std, seed, offset);
  } else {
    concat_noise_kernel<1, 4><<<grid, kThreads, 0, s>>>(o, in, k, tokens, h, noise_std, seed, offset);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels
