// Test support: a kernel that keeps a stream busy for a fixed GPU wall time, so that work
// queued behind it (a store copy) is provably still pending for that long. It reads the
// %globaltimer register (nanoseconds) in one thread until `ns` have passed.
// Kept free of tandem headers so nvcc never parses fmt.
#include "runtime/store/gpu_spin_kernel.h"

namespace tandem {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t ns) {
  const uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < ns) {
  }
}

}  // namespace

cudaError_t LaunchSpin(uint64_t ns, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

}  // namespace tandem
