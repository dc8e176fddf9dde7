# `tandem-bench attention`: target packed causal attention and DFlash block attention, side by
# side with the PyTorch peer (attention_peer.py) when python3 can import torch.
list(APPEND TANDEM_BENCH_SOURCES attention_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::kernels)
set_source_files_properties(attention_bench.cc PROPERTIES COMPILE_DEFINITIONS
  TANDEM_ATTENTION_PEER="${CMAKE_CURRENT_SOURCE_DIR}/attention_peer.py")
