# The DFlash drafter (issue 5): parameters, anchors, forward/backward/AdamW, checkpoints.
# Included from models/CMakeLists.txt; paths are relative to models/.
target_sources(tandem_models PRIVATE
  dflash_params.cc
  dflash_anchors.cc
  dflash_drafter.cc
  dflash_drafter_backward.cc
  dflash_drafter_timing.cc
  dflash_checkpoint.cc
  dflash_trainer.cc)
target_link_libraries(tandem_models PUBLIC tandem::kernels)

tandem_add_test(dflash_drafter_test SOURCES dflash_drafter_test.cc dflash_checkpoint_test.cc dflash_golden_test.cc
                LIBS tandem::models)
# dflash_golden_test reads tests/golden/dflash_tiny_golden.safetensors when present.
target_compile_definitions(dflash_drafter_test PRIVATE TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(TANDEM_HAVE_CUDA)
  tandem_add_test(dflash_drafter_cuda_test SOURCES dflash_drafter_cuda_test.cc
                  LIBS tandem::models GPU)
endif()
