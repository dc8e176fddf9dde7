# `tandem-bench drafter`: DFlash (or --type=dflash2: DFlash2) drafter training step at the
# Qwen3-8B shape, side by side with the torch.compile'd PyTorch peer (drafter_peer.py) when
# python3 can import torch.
if(TANDEM_HAVE_CUDA)
  list(APPEND TANDEM_BENCH_SOURCES drafter_bench.cc drafter_bench_dflash2.cc)
  list(APPEND TANDEM_BENCH_LIBS tandem::models)
  set_source_files_properties(drafter_bench.cc PROPERTIES COMPILE_DEFINITIONS
    TANDEM_DRAFTER_PEER="${CMAKE_CURRENT_SOURCE_DIR}/drafter_peer.py")
endif()
