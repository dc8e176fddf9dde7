// CUDA concat + uniform noise. Algorithm: a grid-stride loop over groups of kVec output
// elements of one row (kVec = 8 when H % 8 == 0 and pointers are aligned: 16-byte loads and
// stores, two Philox blocks per group); each group reads from the input its columns fall in.
// Noise uses __fmul_rn/__fadd_rn so no FMA contraction changes the bits versus the CPU.
#include "kernels/concat_noise_kernels.h"
#include "kernels/elementwise_vec.cuh"
#include "kernels/philox.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;

struct Inputs {
  const bf16_t* x[16];
};

// out: [tokens, k * h]; in.x[i]: [tokens, h]
template <int kVec>
__global__ void concat_noise_kernel(bf16_t* out, Inputs in, int k, int64_t tokens, int64_t h,
                                    float noise_std, uint64_t seed, uint64_t offset) {
  const int64_t row = k * h, nv = h / kVec, items = tokens * k * nv;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < items;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = idx / (k * nv), rest = idx % (k * nv);
    const int i = static_cast<int>(rest / nv);
    const int64_t c = (rest % nv) * kVec;
    const int64_t e0 = t * row + i * h + c;  // first output element of this group
    float v[kVec];
    cuda_detail::LoadVec<kVec>(in.x[i] + t * h + c, v);
    if (noise_std > 0.f) {
      if constexpr (kVec % 4 == 0) {  // e0 is a multiple of 4: whole Philox blocks
#pragma unroll
        for (int b = 0; b < kVec / 4; ++b) {
          const Philox4 r = PhiloxBlock(seed, offset, static_cast<uint64_t>(e0 / 4 + b));
#pragma unroll
          for (int j = 0; j < 4; ++j)
            v[4 * b + j] =
                __fadd_rn(v[4 * b + j], __fmul_rn(noise_std, PhiloxToUniformSym(r.v[j])));
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
    cuda_detail::StoreVec<kVec>(out + e0, v);
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
  if (h % 8 == 0 && aligned) {
    concat_noise_kernel<8><<<cuda_detail::GridFor(tokens * k * h / 8, kThreads), kThreads, 0, s>>>(
        o, in, k, tokens, h, noise_std, seed, offset);
  } else {
    concat_noise_kernel<1><<<cuda_detail::GridFor(tokens * k * h, kThreads), kThreads, 0, s>>>(
        o, in, k, tokens, h, noise_std, seed, offset);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels
