// gtest main for tests labelled `gpu`. Without a visible CUDA device (or in a build
// without CUDA) it prints why and exits 77, which ctest reports as "Skipped".
#include <cstdio>

#include <gtest/gtest.h>

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int main(int argc, char** argv) {
#ifdef TANDEM_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device visible (%s); this GPU test did not run\n",
                err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));
    return 77;
  }
#else
  std::printf("SKIPPED: built without CUDA; this GPU test did not run\n");
  return 77;
#endif
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
