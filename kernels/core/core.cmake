# kernels/core: Tensor and dtypes, the caching device-memory pool and host allocator,
# streams and events, and the CUDA error macros every launcher uses.
tandem_kernel_sources(CPU core/tensor.cc core/memory.cc core/memory_cuda.cc core/stream.cc
                      core/pinned_allocator.cc core/device_props.cc core/device_pools.cc)
tandem_add_test(kernels_core_test SOURCES core/memory_test.cc core/device_pools_test.cc LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(kernels_core_gpu_test SOURCES core/memory_gpu_test.cc LIBS tandem_kernels tandem_kernels_testing GPU)
