# kernels/rope: rotary position embeddings (rotate-half), forward and backward.
tandem_kernel_sources(CPU rope/rope_cpu.cc)
tandem_kernel_sources(CUDA rope/rope.cu rope/rope_cuda.cc)
tandem_add_test(rope_test SOURCES rope/rope_test.cc LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(rope_gpu_test SOURCES rope/rope_gpu_test.cc LIBS tandem_kernels tandem_kernels_testing GPU)
