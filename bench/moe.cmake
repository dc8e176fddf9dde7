# `tandem-bench moe`: the MoE expert GEMM loop and the whole MoE block at the 35B-A3B shape
# against the dense bf16 8192^3 rate of the same run.
list(APPEND TANDEM_BENCH_SOURCES moe_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::kernels)
