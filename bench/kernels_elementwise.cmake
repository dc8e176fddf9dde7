# `tandem-bench kernels` section "elementwise": the memory-bound ops against a
# device-to-device copy measured in the same run and the PyTorch peer.
list(APPEND TANDEM_BENCH_SOURCES kernels_elementwise_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::kernels nlohmann_json::nlohmann_json)
set_source_files_properties(kernels_elementwise_bench.cc PROPERTIES COMPILE_DEFINITIONS
                            TANDEM_BENCH_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
