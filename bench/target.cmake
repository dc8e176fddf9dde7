# `tandem-bench target`: the Qwen3-8B-shaped target forward next to HF transformers
# eager / torch.compile (target_peer.py) when python3 imports torch and transformers.
list(APPEND TANDEM_BENCH_SOURCES target_bench.cc target_fp8.cc target_fidelity.cc fidelity_golden.cc fp8_algos.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::models nlohmann_json::nlohmann_json)
set_source_files_properties(target_bench.cc PROPERTIES COMPILE_DEFINITIONS
  TANDEM_TARGET_PEER="${CMAKE_CURRENT_SOURCE_DIR}/target_peer.py")
# The target family alone (`tandem-bench-target target ...`, same code and output as
# `tandem-bench target`), for hosts where building every family is slow.
if(TANDEM_HAVE_CUDA)
  add_executable(tandem-bench-target main.cc target_bench.cc target_fp8.cc target_fidelity.cc fidelity_golden.cc fp8_algos.cc
                 bench_util.cc gpu_power.cc)
  target_link_libraries(tandem-bench-target PRIVATE tandem::core tandem::models
                        nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
endif()
# The fidelity golden's reader and its checks against a model (CPU: no GPU needed to refuse a
# golden made for another checkpoint).
tandem_add_test(fidelity_golden_test SOURCES fidelity_golden_test.cc fidelity_golden.cc
                LIBS tandem::core tandem::models)
