# Math ops (issue 3): cuBLASLt GEMM, fused LM head + cross-entropy, AdamW + grad norm, NCCL.
# Included from kernels/CMakeLists.txt; paths are relative to kernels/.
list(APPEND TANDEM_KERNEL_SOURCES gemm.cc gemm_cpu.cc lm_head_ce_cpu.cc adamw_cpu.cc nccl.cc)
if(TANDEM_HAVE_CUDA AND TANDEM_NCCL_LIB)
  set_source_files_properties(nccl.cc PROPERTIES COMPILE_DEFINITIONS TANDEM_HAVE_NCCL=1)
endif()
list(APPEND TANDEM_KERNEL_CUDA_SOURCES gemm_cublaslt.cc lm_head_ce.cu lm_head_ce_cuda.cc adamw.cu adamw_cuda.cc)

tandem_add_test(gemm_test SOURCES gemm_test.cc LIBS tandem::kernels)
tandem_add_test(lm_head_ce_test SOURCES lm_head_ce_test.cc LIBS tandem::kernels)
tandem_add_test(adamw_test SOURCES adamw_test.cc LIBS tandem::kernels)
# GPU tests use CUDA runtime calls directly, so they exist only in CUDA builds.
if(TANDEM_HAVE_CUDA)
  tandem_add_test(gemm_cuda_test SOURCES gemm_cuda_test.cc LIBS tandem::kernels GPU)
  tandem_add_test(lm_head_ce_cuda_test SOURCES lm_head_ce_cuda_test.cc LIBS tandem::kernels GPU)
  tandem_add_test(adamw_cuda_test SOURCES adamw_cuda_test.cc LIBS tandem::kernels GPU)
  tandem_add_test(nccl_test SOURCES nccl_test.cc LIBS tandem::kernels GPU)
endif()
