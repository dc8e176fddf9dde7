# The Qwen3 target forward with layer capture (issue 5), built on kernels/. Included from
# models/CMakeLists.txt; paths are relative to models/.
target_sources(tandem_models PRIVATE qwen3_weights.cc qwen3_target.cc)
target_link_libraries(tandem_models PUBLIC tandem::kernels)

tandem_add_test(models_qwen3_target_test
  SOURCES qwen3_target_test.cc qwen3_golden_test.cc
  LIBS tandem::models tandem_kernels_testing)
target_compile_definitions(models_qwen3_target_test PRIVATE
                           TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(TANDEM_HAVE_CUDA)
  tandem_add_test(models_qwen3_target_cuda_test
    SOURCES qwen3_target_cuda_test.cc
    LIBS tandem::models tandem_kernels_testing GPU)
  target_compile_definitions(models_qwen3_target_cuda_test PRIVATE
                             TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
