// Token embedding gather (forward only: the drafter uses the target's frozen embedding).
//
//   ids: i32 [T]   weight: bf16 [V, H]   out: bf16 [T, H]
//   out[t, :] = weight[ids[t], :]; an id outside [0, V) gives a zero row (the GPU cannot
//   report it without a host sync; callers validate ids where they are made).
//
// Contiguous tensors on one device. Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

namespace cpu {
Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s);
}
namespace cuda {
Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s);
}
Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s);

namespace internal {
Status CheckEmbedding(const TensorView& out, const TensorView& ids, const TensorView& weight);
}

}  // namespace tandem::kernels
