# Helpers every bench family uses (bench_util.h): the PyTorch peer runner, CUDA-event timing,
# device fills and the cuBLAS GEMM ceiling (cuBLAS comes with tandem::kernels' CUDA deps).
# Compiled once, here.
list(APPEND TANDEM_BENCH_SOURCES bench_util.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::core tandem::kernels nlohmann_json::nlohmann_json)
