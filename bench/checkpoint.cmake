# `tandem-bench checkpoint`: drafter checkpoint write bandwidth (before/after the parallel
# writer) next to dd on the same directory; CPU only.
list(APPEND TANDEM_BENCH_SOURCES checkpoint_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::actors_whole tandem::models)
