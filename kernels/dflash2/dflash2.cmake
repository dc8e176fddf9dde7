# kernels/dflash2: DFlash2's three new operations (docs/dflash2.md): the grouped dynamic causal
# convolution, the low-rank candidate selector with its training loss, and the output
# multiplier with the final logit soft cap. CPU references in float/double, and the selector
# as TensorView ops on the CPU and in CUDA (selector.h).
tandem_kernel_sources(CPU dflash2/grouped_dynamic_conv_cpu.cc dflash2/candidate_selector_cpu.cc
                      dflash2/logit_softcap_cpu.cc dflash2/selector_check.cc
                      dflash2/selector_cpu.cc)
tandem_kernel_sources(CUDA dflash2/selector.cu dflash2/selector_backward.cu dflash2/selector_walk.cu
                      dflash2/selector_cuda.cc)
tandem_add_test(dflash2_ops_test SOURCES dflash2/grouped_dynamic_conv_test.cc
                dflash2/candidate_selector_test.cc dflash2/logit_softcap_test.cc
                LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(dflash2_selector_test SOURCES dflash2/selector_test.cc
                LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(dflash2_selector_gpu_test SOURCES dflash2/selector_gpu_test.cc
                LIBS tandem_kernels tandem_kernels_testing GPU)
