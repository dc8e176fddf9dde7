# `tandem-bench hybrid`: the Qwen3.5 hybrid target's gated delta rule, head_dim-256 attention and
# 27B-layer forward, next to flash-linear-attention / HF transformers (hybrid_peer.py).
list(APPEND TANDEM_BENCH_SOURCES hybrid_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::models nlohmann_json::nlohmann_json)
set_source_files_properties(hybrid_bench.cc PROPERTIES COMPILE_DEFINITIONS
  TANDEM_HYBRID_PEER="${CMAKE_CURRENT_SOURCE_DIR}/hybrid_peer.py")
# The family alone (`tandem-bench-hybrid hybrid ...`), for hosts where building every family is
# slow.
if(TANDEM_HAVE_CUDA)
  add_executable(tandem-bench-hybrid main.cc hybrid_bench.cc bench_util.cc target_fp8.cc)
  target_link_libraries(tandem-bench-hybrid PRIVATE tandem::core tandem::models
                        nlohmann_json::nlohmann_json)
  set_source_files_properties(hybrid_bench.cc TARGET_DIRECTORY tandem-bench-hybrid PROPERTIES
    COMPILE_DEFINITIONS TANDEM_HYBRID_PEER="${CMAKE_CURRENT_SOURCE_DIR}/hybrid_peer.py")
endif()
