// Spins one thread until %globaltimer (ns since an arbitrary epoch) has advanced `ns`.
#include "runtime/profile/spin_kernel_for_test.h"

namespace tandem::test_util {

namespace {

__global__ void spin_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

}  // namespace

cudaError_t LaunchSpinKernel(cudaStream_t stream, uint64_t ns) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

}  // namespace tandem::test_util
