// Fused concat of the k captured target layers plus uniform noise: the DFlash drafter's
// context input (noise only in training; noise_std = 0 is a plain concat).
//
//   inputs: k tensors bf16 [T, H] (1 <= k <= kMaxConcatInputs)   out: bf16 [T, k*H]
//   e = t * k*H + i*H + h  (the output's linear index)
//   out[t, i*H + h] = bf16(x_i[t, h] + noise_std * U_e),  U_e = PhiloxToUniformSym(word e of
//   stream (seed, offset)) in [-1, 1), i.e. noise ~ U(-noise_std, noise_std).
//
// The product and the sum are single fp32 roundings on both CPU and GPU, so the two agree
// bit for bit. Use a fresh `offset` per step. Contiguous tensors on one device.
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include <span>

#include "kernels/core/tensor.h"

namespace tandem::kernels {

inline constexpr int kMaxConcatInputs = 16;

namespace cpu {
Status ConcatNoiseForward(TensorView out, std::span<const TensorView> inputs, float noise_std,
                          uint64_t seed, uint64_t offset, Stream s);
}
namespace cuda {
Status ConcatNoiseForward(TensorView out, std::span<const TensorView> inputs, float noise_std,
                          uint64_t seed, uint64_t offset, Stream s);
}
Status ConcatNoiseForward(TensorView out, std::span<const TensorView> inputs, float noise_std,
                          uint64_t seed, uint64_t offset, Stream s);

namespace internal {
Status CheckConcatNoise(const TensorView& out, std::span<const TensorView> inputs, float noise_std);
}

}  // namespace tandem::kernels
