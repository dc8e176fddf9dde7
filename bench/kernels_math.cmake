# `tandem-bench kernels` section "math": GEMM, LM head + CE, AdamW.
list(APPEND TANDEM_BENCH_SOURCES kernels_math_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::kernels nlohmann_json::nlohmann_json)
set_source_files_properties(kernels_math_bench.cc PROPERTIES COMPILE_DEFINITIONS
                            TANDEM_BENCH_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
