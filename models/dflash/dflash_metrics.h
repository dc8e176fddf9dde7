// Block-level quality of a DFlash drafter step, from the per-row correctness the loss kernel
// leaves on the device (`DFlashDrafter::correct()`, one byte per block slot: the drafted
// token at that slot equals the real one).
//
// A block is `block_size` rows: slot 0 holds the anchor's real token, slots 1..B-1 are
// drafted. Speculative decoding accepts the drafted tokens of a block up to its first miss,
// so the expected acceptance length is
//   tau = 1 + sum_{j=1}^{B-1} (fraction of blocks whose slots 1..j are all correct)
// (the 1 is the token the target itself adds), and the accuracy is the fraction of correct
// drafted slots, over every block and slot 1..B-1.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace tandem::models {

struct BlockAcceptance {
  double tau = 1.0;       // expected acceptance length, in [1, block_size]
  double accuracy = 0.0;  // fraction of drafted slots predicted correctly, in [0, 1]
};

// `correct` is [rows] with rows a multiple of block_size (>= 2); rows = 0 gives tau 1,
// accuracy 0. REQUIRES: rows % block_size == 0.
BlockAcceptance BlockAcceptanceStats(const uint8_t* correct, int64_t rows, int64_t block_size);

}  // namespace tandem::models
