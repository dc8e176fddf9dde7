# `tandem-bench verify`: one speculative verify step of the Qwen3-8B-shaped target with its KV
# cache, next to HF transformers with its DynamicCache (verify_peer.py).
list(APPEND TANDEM_BENCH_SOURCES verify_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::models nlohmann_json::nlohmann_json)
set_source_files_properties(verify_bench.cc PROPERTIES COMPILE_DEFINITIONS
  TANDEM_VERIFY_PEER="${CMAKE_CURRENT_SOURCE_DIR}/verify_peer.py")
