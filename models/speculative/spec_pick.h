// The token-picking rule of speculative decoding, shared by DFlashDecoder and
// DFlashBatchDecoder so both draw the same tokens: temperature 0 takes each row's argmax
// (ties: the lowest id); above 0, inverse-CDF sampling from softmax(row / T) in double with
// one 53-bit uniform per row from SplitMix64 over *rng_state (the same draw on every
// platform; the state advances once per sampled row).
//
// Thread-safety: pure function over caller-owned values.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::models {

// Picks over host logits [rows, vocab] (row-major).
std::vector<int32_t> PickTokens(const float* logits, int64_t rows, int64_t vocab,
                                float temperature, uint64_t* rng_state);

}  // namespace tandem::models
