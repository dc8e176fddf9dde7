# `tandem-bench tokenizer`: tokenizer.json encode (one thread, all threads) and chat JSONL to
# training examples (what `tandem data --model` does), side by side with HF tokenizers
# (tokenizer_peer.py) when python3 can import it.
list(APPEND TANDEM_BENCH_SOURCES tokenizer_bench.cc)
list(APPEND TANDEM_BENCH_LIBS tandem::chat_data)
set_source_files_properties(tokenizer_bench.cc PROPERTIES COMPILE_DEFINITIONS
  TANDEM_TOKENIZER_PEER="${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_peer.py")
