# kernels/random: counter-based Philox random numbers (noise, dropout-free sampling).
tandem_kernel_sources(CPU random/philox_cpu.cc)
tandem_kernel_sources(CUDA random/philox.cu random/philox_cuda.cc)
tandem_add_test(random_test SOURCES random/philox_test.cc LIBS tandem_kernels tandem_kernels_testing)
