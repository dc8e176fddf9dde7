# Foundations (memory pool, Tensor, streams, Philox) and the memory-bound ops: embedding,
# RMSNorm, RoPE, SwiGLU, residual add / casts, concat+noise, row gather. Included by
# kernels/CMakeLists.txt.
list(APPEND TANDEM_KERNEL_SOURCES
  memory.cc memory_cuda.cc stream.cc philox_cpu.cc elementwise_cpu.cc rmsnorm_cpu.cc
  rope_cpu.cc swiglu_cpu.cc embedding.cc concat_noise_cpu.cc row_gather_cpu.cc
  swiglu_fused_cpu.cc fused_norm_cpu.cc)
# Per op: foo.cu holds the kernels and raw launchers (no Status/fmt: nvcc cannot build fmt's
# compile-time checks); foo_cuda.cc the cuda:: entry points with checks and NVTX ranges.
list(APPEND TANDEM_KERNEL_CUDA_SOURCES
  philox.cu philox_cuda.cc elementwise.cu elementwise_cuda.cc rmsnorm.cu rmsnorm_cuda.cc
  rope.cu rope_cuda.cc swiglu.cu swiglu_cuda.cc
  concat_noise.cu concat_noise_cuda.cc row_gather.cu row_gather_cuda.cc
  swiglu_fused.cu swiglu_fused_cuda.cc fused_norm.cu fused_norm_cuda.cc)

if(TANDEM_HAVE_CUDA)
  # CMake 3.25 does not know nvcc's C++20 flag and refuses CUDA20 targets; TandemCuda.cmake
  # already passes -std=c++20 in CMAKE_CUDA_FLAGS, so the per-target option is empty.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "")
endif()

# Shared test helpers (random inputs, AllClose with a worst-element report, float64 finite
# differences, a fake device-memory backend).
add_library(tandem_kernels_testing STATIC testing/testing.cc testing/gpu.cc)
target_link_libraries(tandem_kernels_testing PUBLIC tandem_kernels GTest::gtest)

# CPU tests (CI) and GPU tests (label gpu; SKIPPED without a device), one binary each.
tandem_add_test(kernels_core_test
  SOURCES memory_test.cc philox_test.cc elementwise_test.cc rmsnorm_test.cc rope_test.cc
          swiglu_test.cc
  LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(kernels_core_gpu_test
  SOURCES memory_gpu_test.cc rmsnorm_gpu_test.cc rope_gpu_test.cc swiglu_gpu_test.cc
          elementwise_gpu_test.cc
  LIBS tandem_kernels tandem_kernels_testing GPU)
# The fused ops (fused_norm.h, swiglu_fused.h) against the unfused kernels they replace.
tandem_add_test(kernels_fused_test SOURCES fused_norm_test.cc swiglu_fused_test.cc
  LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(kernels_fused_gpu_test SOURCES fused_norm_gpu_test.cc swiglu_fused_gpu_test.cc
  LIBS tandem_kernels tandem_kernels_testing GPU)
tandem_add_test(row_gather_test SOURCES row_gather_test.cc
  LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(row_gather_gpu_test SOURCES row_gather_gpu_test.cc
  LIBS tandem_kernels tandem_kernels_testing GPU)
