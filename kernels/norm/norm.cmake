# kernels/norm: RMSNorm forward/backward and the fused norms (norm + RoPE, residual add +
# norm, norm backward + residual add).
tandem_kernel_sources(CPU norm/rmsnorm_cpu.cc norm/fused_norm_cpu.cc norm/rmsnorm_fp8_cpu.cc)
tandem_kernel_sources(CUDA norm/rmsnorm.cu norm/rmsnorm_cuda.cc
     norm/fused_norm.cu norm/fused_norm_cuda.cc norm/rmsnorm_fp8.cu norm/rmsnorm_fp8_cuda.cc)
tandem_add_test(norm_test SOURCES norm/rmsnorm_test.cc norm/fused_norm_test.cc
                norm/rmsnorm_fp8_test.cc LIBS tandem_kernels tandem_kernels_testing)
# The FP8 producer tests use CUDA runtime calls directly: CUDA builds only.
set(norm_gpu_sources norm/rmsnorm_gpu_test.cc norm/fused_norm_gpu_test.cc)
if(TANDEM_HAVE_CUDA)
  list(APPEND norm_gpu_sources norm/rmsnorm_fp8_gpu_test.cc)
endif()
tandem_add_test(norm_gpu_test SOURCES ${norm_gpu_sources} LIBS tandem_kernels tandem_kernels_testing GPU)
