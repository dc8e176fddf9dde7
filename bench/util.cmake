# Helpers every bench family uses (bench_util.h): the PyTorch peer runner, CUDA-event timing,
# device fills and the cuBLAS GEMM ceiling (cuBLAS comes with tandem::kernels' CUDA deps).
# Compiled once, here.
list(APPEND TANDEM_BENCH_SOURCES bench_util.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::core tandem::kernels nlohmann_json::nlohmann_json)
# Power and SM clock during a timed region (gpu_power.h): NVML, opened at run time.
if(TANDEM_HAVE_CUDA)
  list(APPEND TANDEM_BENCH_SOURCES gpu_power.cc)
  list(APPEND TANDEM_BENCH_LIBS ${CMAKE_DL_LIBS})
endif()
if(TANDEM_HAVE_CUDA)
  tandem_add_test(gpu_power_test SOURCES gpu_power_test.cc gpu_power.cc bench_util.cc
                  LIBS tandem::core tandem::kernels nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS}
                  GPU)
endif()
