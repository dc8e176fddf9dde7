# tandem-bench store: ObjectStore put+seal+release vs malloc/free (and cudaHostAlloc).
list(APPEND TANDEM_BENCH_SOURCES ${CMAKE_CURRENT_LIST_DIR}/store_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::store)
