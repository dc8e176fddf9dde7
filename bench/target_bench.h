// What the Qwen3-8B-shaped benches share (`tandem-bench target`, `verify`, `drafter`,
// `checkpoint`).
// Thread-safety: pure functions.
#pragma once

#ifdef TANDEM_HAVE_CUDA
#include "models/dflash/dflash_config.h"
#include "models/io/hf_config.h"

namespace tandem::bench {

// Qwen3-8B's shape (36 layers, hidden 4096, 32/8 heads of 128, intermediate 12288, vocab
// 151936, RoPE theta 1e6), for benches with random weights.
models::TransformerConfig Qwen3_8bConfig();

// A DFlash drafter for that target: `layers` layers of its shape (sliding window 2048, the
// last layer full attention), block 16, 5 context layers, mask token 151669.
models::DFlashConfig Qwen3_8bDrafterConfig(int layers);

}  // namespace tandem::bench
#endif
