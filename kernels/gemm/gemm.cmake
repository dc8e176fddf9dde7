# kernels/gemm: GEMMs through cuBLASLt with fused epilogues, block-scaled FP8 (quantize,
# dequantize, GEMM), and the CPU references.
tandem_kernel_sources(CPU gemm/gemm.cc gemm/gemm_cpu.cc gemm/fp8_cpu.cc gemm/fp8_raw_cpu.cc)
tandem_kernel_sources(CUDA gemm/gemm_cublaslt.cc gemm/fp8.cu gemm/fp8_cuda.cc)
tandem_add_test(gemm_test SOURCES gemm/gemm_test.cc gemm/fp8_test.cc LIBS tandem_kernels)
if(TANDEM_HAVE_CUDA)
  tandem_add_test(gemm_gpu_test SOURCES gemm/gemm_gpu_test.cc gemm/fp8_gpu_test.cc LIBS tandem_kernels GPU)
endif()
