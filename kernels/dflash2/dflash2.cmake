# kernels/dflash2: DFlash2's three new operations (docs/dflash2.md): float/double references
# (forward and backward) of the grouped dynamic causal convolution, the low-rank candidate
# selector with its training loss, and the output multiplier with the final logit soft cap;
# the bf16 convolution op, the row top-k of transformed logits and the selector as TensorView
# ops (selector.h) on CPU and CUDA.
tandem_kernel_sources(CPU dflash2/grouped_dynamic_conv_cpu.cc dflash2/candidate_selector_cpu.cc
                      dflash2/logit_softcap_cpu.cc dflash2/dynamic_conv_cpu.cc
                      dflash2/row_topk_cpu.cc dflash2/selector_check.cc dflash2/selector_cpu.cc)
tandem_kernel_sources(CUDA dflash2/dynamic_conv.cu dflash2/dynamic_conv_bwd.cu
                      dflash2/dynamic_conv_cuda.cc dflash2/row_topk.cu dflash2/row_topk_cuda.cc
                      dflash2/selector.cu dflash2/selector_backward.cu dflash2/selector_walk.cu
                      dflash2/selector_cuda.cc)
tandem_add_test(dflash2_ops_test SOURCES dflash2/grouped_dynamic_conv_test.cc
                dflash2/candidate_selector_test.cc dflash2/logit_softcap_test.cc
                dflash2/dynamic_conv_test.cc dflash2/row_topk_test.cc
                LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(dflash2_ops_gpu_test SOURCES dflash2/dynamic_conv_gpu_test.cc
                dflash2/row_topk_gpu_test.cc LIBS tandem_kernels tandem_kernels_testing GPU)
tandem_add_test(dflash2_selector_test SOURCES dflash2/selector_test.cc
                LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(dflash2_selector_gpu_test SOURCES dflash2/selector_gpu_test.cc
                LIBS tandem_kernels tandem_kernels_testing GPU)
