# kernels/dflash2: DFlash2's three new operations, CPU references only for now (forward and
# backward): the grouped dynamic causal convolution, the low-rank candidate selector with its
# training loss, and the output multiplier with the final logit soft cap. docs/dflash2.md.
tandem_kernel_sources(CPU dflash2/grouped_dynamic_conv_cpu.cc dflash2/candidate_selector_cpu.cc
                      dflash2/logit_softcap_cpu.cc)
tandem_add_test(dflash2_ops_test SOURCES dflash2/grouped_dynamic_conv_test.cc
                dflash2/candidate_selector_test.cc dflash2/logit_softcap_test.cc
                LIBS tandem_kernels tandem_kernels_testing)
