# `tandem-bench target`: the Qwen3-8B-shaped target forward (issue 5) next to HF transformers
# eager / torch.compile (target_peer.py) when python3 imports torch and transformers.
list(APPEND TANDEM_BENCH_SOURCES target_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::models nlohmann_json::nlohmann_json)
set_source_files_properties(target_bench.cc PROPERTIES COMPILE_DEFINITIONS
  TANDEM_TARGET_PEER="${CMAKE_CURRENT_SOURCE_DIR}/target_peer.py")
