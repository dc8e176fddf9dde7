# actors/dflash: the DFlash pipeline as actors (TargetActor, DrafterActor) and its job tests.
target_sources(tandem_actors PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_actor.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_eval.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_eval_best.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_eval_settings.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_loop.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_metrics.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_device.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/drafter_settings.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/dp_positions.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/dp_positions_nodes.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/grad_allreduce.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/grad_allreduce_nodes.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/hidden_batch_wire.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/synthetic_source.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/target_actor.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/target_model.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/target_pipeline_cuda.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/target_pipeline.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/target_settings.cc)
target_link_libraries(tandem_actors PUBLIC tandem::models tandem::speculative tandem::cluster
                                           tandem::transfer)

# The job tests train the tiny job end to end, several times each: 10-75 s on an idle machine,
# 75-300 s measured on a loaded 2-core machine under ctest -j4. Their timeout is
# sized for heavier load still (a sanitizer build or more builds beside them); it stops a hang.
set(job_test_timeout 1800)
tandem_add_test(dflash_job_test SOURCES dflash/dflash_job_test.cc LIBS tandem::actors_whole
                TIMEOUT ${job_test_timeout})
# The tiny job with drafter_type = "dflash2".
tandem_add_test(dflash2_job_test SOURCES dflash/dflash2_job_test.cc LIBS tandem::actors_whole
                TIMEOUT ${job_test_timeout})
tandem_add_test(dflash_dp_test SOURCES dflash/dflash_dp_test.cc LIBS tandem::actors_whole
                TIMEOUT ${job_test_timeout})
tandem_add_test(fp8_job_test SOURCES dflash/fp8_job_test.cc LIBS tandem::actors_whole
                TIMEOUT ${job_test_timeout})
# Validation refuses a GPU that cannot hold the target's weights plus the drafter's state.
tandem_add_test(device_memory_check_test SOURCES dflash/device_memory_check_test.cc
                LIBS tandem::actors_whole)
target_compile_definitions(device_memory_check_test PRIVATE TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
tandem_add_test(grad_allreduce_test SOURCES dflash/grad_allreduce_test.cc LIBS tandem::actors_whole)
# Resume checks and the target's vocab reaching the data layer.
tandem_add_test(dflash_trust_test
                SOURCES dflash/checkpoint/checkpoint_resume_test.cc dflash/target_vocab_test.cc
                LIBS tandem::actors_whole TIMEOUT ${job_test_timeout})
# The DFlash job against a Qwen3.5 hybrid target (reads tests/golden/qwen3_5_tiny).
tandem_add_test(dflash_hybrid_job_test SOURCES dflash/dflash_hybrid_job_test.cc
                LIBS tandem::actors_whole)
target_compile_definitions(dflash_hybrid_job_test PRIVATE TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The DFlash job against a Qwen3-MoE target (random weights of a tiny config).
tandem_add_test(dflash_moe_job_test SOURCES dflash/dflash_moe_job_test.cc
                LIBS tandem::actors_whole TIMEOUT ${job_test_timeout})
include(${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/checkpoint.cmake)
# A HiddenBatch across nodes: its wire codec, without the actors archive.
tandem_add_test(hidden_batch_wire_test SOURCES dflash/hidden_batch_wire_test.cc
                LIBS tandem::transfer tandem::corpus)
# The drafter's metrics line and train record, DFlash2's selector numbers included.
tandem_add_test(drafter_metrics_test SOURCES dflash/drafter_metrics_test.cc
                LIBS tandem::actors_whole)
