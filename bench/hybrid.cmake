# `tandem-bench hybrid`: the Qwen3.5 hybrid target's gated delta rule, head_dim-256 attention and
# 27B-layer or 35B-A3B (MoE, built from its example job) forward, next to
# flash-linear-attention / HF transformers (hybrid_peer.py).
list(APPEND TANDEM_BENCH_SOURCES hybrid_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::models tandem::actors_whole nlohmann_json::nlohmann_json)
set(TANDEM_HYBRID_DEFS TANDEM_HYBRID_PEER="${CMAKE_CURRENT_SOURCE_DIR}/hybrid_peer.py"
    TANDEM_HYBRID_MOE_JOB="${CMAKE_SOURCE_DIR}/examples/qwen3.6-35b-a3b-1gpu.toml")
set_source_files_properties(hybrid_bench.cc PROPERTIES COMPILE_DEFINITIONS "${TANDEM_HYBRID_DEFS}")
# The family alone (`tandem-bench-hybrid hybrid ...`), for hosts where building every family is
# slow.
if(TANDEM_HAVE_CUDA)
  add_executable(tandem-bench-hybrid main.cc hybrid_bench.cc bench_util.cc target_fp8.cc)
  target_link_libraries(tandem-bench-hybrid PRIVATE tandem::core tandem::models
                        tandem::actors_whole nlohmann_json::nlohmann_json)
  set_source_files_properties(hybrid_bench.cc TARGET_DIRECTORY tandem-bench-hybrid PROPERTIES
    COMPILE_DEFINITIONS "${TANDEM_HYBRID_DEFS}")
endif()
