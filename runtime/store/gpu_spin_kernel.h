// Test support for store GPU tests: LaunchSpin queues a one-thread kernel on `stream` that
// busy-waits `ns` nanoseconds of GPU time. Returns the launch error. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem {

cudaError_t LaunchSpin(uint64_t ns, cudaStream_t stream);

}  // namespace tandem
