# tandem-bench cluster: object links over loopback vs a plain socket; 3 processes vs 1.
list(APPEND TANDEM_BENCH_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cluster_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::transfer)
