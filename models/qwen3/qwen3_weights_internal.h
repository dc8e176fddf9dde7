// Private to models/qwen3: what Qwen3Weights and Qwen3Head (the embedding and LM head
// alone) share, so random heads equal the heads of random whole models bit for bit.
//
// Thread-safety: functions; FillRandomWeight's work is ordered on `stream`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/core/memory.h"
#include "models/io/weight_spec.h"
#include "runtime/core/status.h"

namespace tandem::models {

// f32 scratch elements per random fill.
inline constexpr int64_t kRandomChunk = int64_t{1} << 24;

// The allocator of weights on `device`: the CUDA caching pool, or host memory.
Result<kernels::Allocator*> AllocatorFor(kernels::Device device);

// Fills `dst` (bf16, s.shape) with weight `s`'s random values: Philox stream `seed`, offset
// (index << 20) + chunk for each kRandomChunk-element chunk, where `index` is s's position
// in CausalLmWeightSpecs; norms uniform in [0.8, 1.2), embeddings and LM head in +-scale,
// other matrices in +-scale/sqrt(in). `scratch`: f32 [kRandomChunk] on dst's device.
Status FillRandomWeight(const WeightSpec& s, size_t index, kernels::TensorView dst,
                        uint64_t seed, float scale, const kernels::Tensor& scratch,
                        kernels::Stream stream);

}  // namespace tandem::models
