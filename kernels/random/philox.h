// Counter-based random numbers (Philox4x32-10, Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11) that give bit-identical results on the CPU and in CUDA kernels.
//
// A draw is a pure function of (seed, offset, index): no state, so any thread can make the
// number for any element without coordination, and a CPU reference reproduces a GPU run
// exactly. Element `index` of stream (seed, offset) is word `index % 4` of
//   Philox4x32-10(key = {seed lo, seed hi}, counter = {q lo, q hi, offset lo, offset hi}),
// q = index / 4. Use a fresh `offset` per call site and step (e.g. the training step) so
// successive calls never reuse numbers.
//
// Floats are made from integer bits with exact arithmetic only (no rounding, no FMA-able
// expression), so the host and device compilers cannot disagree.
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/dtype.h"
#if !defined(__CUDACC__)
#include "kernels/core/tensor.h"  // the fill op below; .cu files (nvcc) use only the math
#endif

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif

namespace tandem::kernels {

struct Philox4 {
  uint32_t v[4];
};

TANDEM_HD void PhiloxMulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  *lo = a * b;
#else
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
#endif
}

// The Philox4x32 bijection with 10 rounds: counter c, key (k0, k1).
TANDEM_HD Philox4 Philox4x32_10(Philox4 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    PhiloxMulHiLo(kM0, c.v[0], &hi0, &lo0);
    PhiloxMulHiLo(kM1, c.v[2], &hi1, &lo1);
    c = Philox4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

// Four consecutive 32-bit words of stream (seed, offset): elements 4q .. 4q+3.
TANDEM_HD Philox4 PhiloxBlock(uint64_t seed, uint64_t offset, uint64_t q) {
  Philox4 c{{static_cast<uint32_t>(q), static_cast<uint32_t>(q >> 32),
             static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)}};
  return Philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// [0, 1): the top 24 bits times 2^-24 (exact in fp32).
TANDEM_HD float PhiloxToUniform01(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 5.9604644775390625e-8f;
}

// [-1, 1): (top 24 bits - 2^23) times 2^-23 (exact in fp32).
TANDEM_HD float PhiloxToUniformSym(uint32_t bits) {
  return static_cast<float>(static_cast<int32_t>(bits >> 8) - (1 << 23)) * 1.1920928955078125e-7f;
}

// Uniform [0, 1) float of element `index` in stream (seed, offset).
TANDEM_HD float PhiloxUniform(uint64_t seed, uint64_t offset, uint64_t index) {
  return PhiloxToUniform01(PhiloxBlock(seed, offset, index >> 2).v[index & 3]);
}

// a * b + c with one rounding, identical on host and device.
TANDEM_HD float PhiloxFma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

#if !defined(__CUDACC__)
// out: f32, any shape, contiguous. out[i] = lo + (hi - lo) * PhiloxUniform(seed, offset, i)
// (one fused multiply-add), the same bits on the CPU and the GPU.
namespace cpu {
Status PhiloxUniformFill(TensorView out, float lo, float hi, uint64_t seed, uint64_t offset,
                         Stream s);
}
namespace cuda {
Status PhiloxUniformFill(TensorView out, float lo, float hi, uint64_t seed, uint64_t offset,
                         Stream s);
}
Status PhiloxUniformFill(TensorView out, float lo, float hi, uint64_t seed, uint64_t offset,
                         Stream s);
#endif  // !__CUDACC__

}  // namespace tandem::kernels
