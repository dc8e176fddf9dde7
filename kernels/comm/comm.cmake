# kernels/comm: NCCL communicators and all-reduce (data-parallel gradients).
tandem_kernel_sources(CPU comm/nccl.cc)
if(TANDEM_HAVE_CUDA AND TANDEM_NCCL_LIB)
  set_source_files_properties(comm/nccl.cc PROPERTIES COMPILE_DEFINITIONS TANDEM_HAVE_NCCL=1)
endif()
if(TANDEM_HAVE_CUDA)
  tandem_add_test(nccl_gpu_test SOURCES comm/nccl_gpu_test.cc LIBS tandem_kernels GPU)
endif()
