// Raw launchers of the SwiGLU kernels (swiglu.cu), called by swiglu_cuda.cc. They return the
// launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// A bf16 [rows, cols] matrix with row stride `ld` (elements) and unit column stride.
struct Bf16Rows {
  void* data;
  int64_t ld;
};

// out = silu(gate) * up, all [rows, cols].
cudaError_t LaunchSwiGluForward(Bf16Rows out, Bf16Rows gate, Bf16Rows up, int64_t rows,
                                int64_t cols, Stream s);
// dgate, dup from dout, gate, up, all [rows, cols].
cudaError_t LaunchSwiGluBackward(Bf16Rows dgate, Bf16Rows dup, Bf16Rows dout, Bf16Rows gate,
                                 Bf16Rows up, int64_t rows, int64_t cols, Stream s);

}  // namespace tandem::kernels
