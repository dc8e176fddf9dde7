# Foundations (memory pool, Tensor, streams, Philox) and the memory-bound ops: embedding,
# RMSNorm, RoPE, SwiGLU, residual add / casts, concat+noise. Included by kernels/CMakeLists.txt.
list(APPEND TANDEM_KERNEL_SOURCES
  memory.cc memory_cuda.cc stream.cc philox_cpu.cc elementwise_cpu.cc rmsnorm_cpu.cc)
# Per op: foo.cu holds the kernels and raw launchers (no Status/fmt: nvcc cannot build fmt's
# compile-time checks); foo_cuda.cc the cuda:: entry points with checks and NVTX ranges.
list(APPEND TANDEM_KERNEL_CUDA_SOURCES
  philox.cu philox_cuda.cc elementwise.cu elementwise_cuda.cc rmsnorm.cu rmsnorm_cuda.cc)

if(TANDEM_HAVE_CUDA)
  # CMake 3.25 does not know nvcc's C++20 flag and refuses CUDA20 targets; TandemCuda.cmake
  # already passes -std=c++20 in CMAKE_CUDA_FLAGS, so the per-target option is empty.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "")
endif()

# Shared test helpers (random inputs, AllClose with a worst-element report, float64 finite
# differences, a fake device-memory backend).
add_library(tandem_kernels_testing STATIC testing/testing.cc)
target_link_libraries(tandem_kernels_testing PUBLIC tandem_kernels GTest::gtest)

set(_core_test_libs tandem_kernels tandem_kernels_testing)
tandem_add_test(kernels_memory_test SOURCES memory_test.cc LIBS ${_core_test_libs})
tandem_add_test(kernels_philox_test SOURCES philox_test.cc LIBS ${_core_test_libs})
tandem_add_test(kernels_rmsnorm_test SOURCES rmsnorm_test.cc LIBS ${_core_test_libs})
