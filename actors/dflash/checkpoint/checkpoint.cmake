# actors/dflash/checkpoint: the drafter's checkpoints (state file, resume checks, snapshots,
# the writer, retention, cleanup) and their tests. Part of tandem_actors.
target_sources(tandem_actors PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/checkpoint_cleanup.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/checkpoint_resume.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/checkpoint_retention.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/checkpoint_snapshot.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/checkpoint_state.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/drafter_checkpointer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dflash/checkpoint/resume_positions.cc)

tandem_add_test(checkpoint_cleanup_test SOURCES dflash/checkpoint/checkpoint_cleanup_test.cc
                LIBS tandem_actors)
# Asynchronous checkpoints (bitwise against synchronous ones, kill -9 mid-write, a failed
# write as the job's error).
tandem_add_test(async_checkpoint_test SOURCES dflash/checkpoint/async_checkpoint_test.cc
                LIBS tandem::actors_whole TIMEOUT ${job_test_timeout})
# keep_last retention, the snapshot's pinned budget by default.
tandem_add_test(checkpoint_retention_test SOURCES dflash/checkpoint/checkpoint_retention_test.cc
                LIBS tandem_actors)
tandem_add_test(checkpoint_policy_test SOURCES dflash/checkpoint/checkpoint_policy_test.cc
                LIBS tandem::actors_whole)
tandem_add_test(checkpoint_snapshot_gpu_test
                SOURCES dflash/checkpoint/checkpoint_snapshot_gpu_test.cc
                LIBS tandem::actors_whole GPU)
# The targets' data positions of a resumed job, as the drafter class's job-prepare hook
# publishes them.
tandem_add_test(resume_positions_test SOURCES dflash/checkpoint/resume_positions_test.cc
                LIBS tandem_actors)
