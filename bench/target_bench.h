// What the Qwen3 target benches share (`tandem-bench target` and `tandem-bench verify`).
// Thread-safety: pure functions.
#pragma once

#ifdef TANDEM_HAVE_CUDA
#include "models/io/hf_config.h"

namespace tandem::bench {

// Qwen3-8B's shape (36 layers, hidden 4096, 32/8 heads of 128, intermediate 12288, vocab
// 151936, RoPE theta 1e6), for benches with random weights.
models::TransformerConfig Qwen3_8bConfig();

}  // namespace tandem::bench
#endif
