# kernels/mlp: SwiGLU forward/backward and the fused recompute + backward.
tandem_kernel_sources(CPU mlp/swiglu_cpu.cc mlp/swiglu_fused_cpu.cc mlp/swiglu_fp8_cpu.cc)
tandem_kernel_sources(CUDA mlp/swiglu.cu mlp/swiglu_cuda.cc
     mlp/swiglu_fused.cu mlp/swiglu_fused_cuda.cc mlp/swiglu_fp8.cu mlp/swiglu_fp8_cuda.cc)
tandem_add_test(mlp_test SOURCES mlp/swiglu_test.cc mlp/swiglu_fused_test.cc LIBS tandem_kernels tandem_kernels_testing)
# The FP8 producer tests use CUDA runtime calls directly: CUDA builds only.
set(mlp_gpu_sources mlp/swiglu_gpu_test.cc mlp/swiglu_fused_gpu_test.cc)
if(TANDEM_HAVE_CUDA)
  list(APPEND mlp_gpu_sources mlp/swiglu_fp8_gpu_test.cc)
endif()
tandem_add_test(mlp_gpu_test SOURCES ${mlp_gpu_sources} LIBS tandem_kernels tandem_kernels_testing GPU)
