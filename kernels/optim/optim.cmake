# kernels/optim: AdamW on fp32 master weights and the global gradient norm.
tandem_kernel_sources(CPU optim/adamw_cpu.cc)
tandem_kernel_sources(CUDA optim/adamw.cu optim/adamw_cuda.cc)
tandem_add_test(adamw_test SOURCES optim/adamw_test.cc LIBS tandem_kernels)
if(TANDEM_HAVE_CUDA)
  tandem_add_test(adamw_gpu_test SOURCES optim/adamw_gpu_test.cc LIBS tandem_kernels GPU)
endif()
