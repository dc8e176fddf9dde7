// Test support for the runtime's GPU tests (the store's copy fences, the profile's GPU stage
// timers): LaunchSpin queues a one-thread kernel on `stream` that busy-waits until the GPU's
// %globaltimer has advanced `ns` nanoseconds, so a stream is provably busy for that long (a
// GPU stage of known length, a copy provably still pending behind it). Returns the launch
// error. Built only with CUDA; the kernel's .cu includes no tandem header, so nvcc never
// parses fmt and the tests themselves stay plain C++.
//
// Thread-safety: stateless.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::testing {

cudaError_t LaunchSpin(uint64_t ns, cudaStream_t stream);

}  // namespace tandem::testing
