// Test helper: a kernel that busy-waits on the GPU's nanosecond timer, giving a GPU stage of
// known length. Kept in its own .cu so the test itself (which includes fmt through Status)
// is compiled by the host compiler. Thread-safety: stateless.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::test_util {

// Enqueues one single-thread kernel on `stream` that runs for at least `ns` nanoseconds.
// Returns the launch error.
cudaError_t LaunchSpinKernel(cudaStream_t stream, uint64_t ns);

}  // namespace tandem::test_util
