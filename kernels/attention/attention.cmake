# kernels/attention: packed causal attention for the target (cuDNN fused SDPA through the
# backend API, own fallback kernel) and DFlash block attention (own kernels, fwd + bwd).
tandem_kernel_sources(CPU attention/attention_cpu.cc attention/decode_attention_cpu.cc)
tandem_kernel_sources(CUDA attention/dflash_attention.cu attention/dflash_attention_cuda.cc
     attention/dflash_mma.cu attention/dflash_mma_bwd.cu attention/dflash_wgmma_ctx.cu
     attention/dflash_wgmma_bwd.cu attention/dflash_wgmma_fwd.cu
     attention/varlen_attention.cu attention/cudnn_sdpa.cc
     attention/decode_attention.cu attention/decode_attention_cuda.cc)
tandem_add_test(attention_test SOURCES attention/attention_test.cc LIBS tandem_kernels)
tandem_add_test(attention_gpu_test SOURCES attention/attention_gpu_test.cc LIBS tandem_kernels GPU)
tandem_add_test(dflash_mma_gpu_test SOURCES attention/dflash_mma_gpu_test.cc LIBS tandem_kernels GPU)
tandem_add_test(dflash_wgmma_gpu_test SOURCES attention/dflash_wgmma_gpu_test.cc
    LIBS tandem_kernels GPU)
