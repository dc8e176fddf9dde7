# Attention (issue 4): packed causal attention for the target (cuDNN fused SDPA through the
# backend API, own fallback kernel) and DFlash block attention (own kernels, fwd + bwd).
# Included from kernels/CMakeLists.txt; paths are relative to kernels/.
list(APPEND TANDEM_KERNEL_SOURCES attention/attention_cpu.cc)
list(APPEND TANDEM_KERNEL_CUDA_SOURCES attention/dflash_attention.cu attention/dflash_attention_cuda.cc
     attention/dflash_mma.cu attention/dflash_mma_bwd.cu
     attention/varlen_attention.cu attention/cudnn_sdpa.cc)

tandem_add_test(attention_cpu_test SOURCES attention/attention_cpu_test.cc LIBS tandem::kernels)
tandem_add_test(attention_cuda_test SOURCES attention/attention_cuda_test.cc
                LIBS tandem::kernels GPU)
tandem_add_test(dflash_mma_cuda_test SOURCES attention/dflash_mma_cuda_test.cc
                LIBS tandem::kernels GPU)
