# `tandem-bench kernels` section "dflash2_conv": DFlash2's grouped dynamic convolution
# forward / backward against a device-to-device copy of the same bytes.
list(APPEND TANDEM_BENCH_SOURCES kernels_dflash2_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::kernels)
# Section "row_topk": the selector's row top-k on one LM head chunk against a copy.
list(APPEND TANDEM_BENCH_SOURCES kernels_topk_bench.cc)
