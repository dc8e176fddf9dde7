# kernels/loss: the fused, chunked LM head + cross-entropy (logits never materialised whole),
# in bf16 and with an FP8 frozen LM head.
tandem_kernel_sources(CPU loss/lm_head_ce_cpu.cc loss/lm_head_ce_fp8_cpu.cc)
tandem_kernel_sources(CUDA loss/lm_head_ce.cu loss/lm_head_ce_cuda.cc loss/lm_head_ce_fp8_cuda.cc)
tandem_add_test(lm_head_ce_test SOURCES loss/lm_head_ce_test.cc loss/lm_head_ce_fp8_test.cc
                loss/lm_head_ce_transform_test.cc
                LIBS tandem_kernels)
if(TANDEM_HAVE_CUDA)
  tandem_add_test(lm_head_ce_gpu_test
                  SOURCES loss/lm_head_ce_gpu_test.cc loss/lm_head_ce_fp8_gpu_test.cc
                          loss/lm_head_ce_transform_gpu_test.cc
                  LIBS tandem_kernels GPU)
endif()
