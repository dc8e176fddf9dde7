// Raw launcher of the RoPE kernel (rope.cu), called by rope_cuda.cc. Returns the launch's
// cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out, x: bf16 [tokens, heads, head_dim] (may alias); pos: i32 [tokens];
// inv_freq: host array of rotary_dim / 2 floats (copied into the kernel's arguments).
// sign +1 forward, -1 backward. REQUIRES: rotary_dim even, <= head_dim, <= kRopeMaxRotaryDim.
cudaError_t LaunchRope(void* out, const void* x, const int32_t* pos, const float* inv_freq,
                       int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                       float sign, Stream s);

}  // namespace tandem::kernels
