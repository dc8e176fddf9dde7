# `tandem-bench pipeline [seconds]`: the colocated Qwen3-8B-shaped DFlash job on one GPU
# (examples/qwen3-8b-1gpu.toml) against the standalone target and drafter per-token costs;
# `tandem-bench loss-ab [steps]`: that job's loss curves, bf16 against an FP8 path.
list(APPEND TANDEM_BENCH_SOURCES pipeline_bench.cc loss_ab_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::actors_whole tandem::models)
set_source_files_properties(pipeline_bench.cc loss_ab_bench.cc PROPERTIES COMPILE_DEFINITIONS
  TANDEM_PIPELINE_JOB="${CMAKE_SOURCE_DIR}/examples/qwen3-8b-1gpu.toml")
