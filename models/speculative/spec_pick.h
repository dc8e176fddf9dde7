// The token-picking rule of speculative decoding, shared by DFlashDecoder and
// DFlashBatchDecoder so both draw the same tokens: temperature 0 takes each row's argmax
// (ties: the lowest id); above 0, inverse-CDF sampling from softmax(row / T) in double with
// one 53-bit uniform per row from SplitMix64 over *rng_state (the same draw on every
// platform; the state advances once per sampled row).
//
// VerifyBySampling is the rejection rule of speculative sampling at temperature T > 0
// (drafts drawn from the drafter's softmax(row / T) are accepted with probability
// min(1, p(x) / q(x)); the first rejected slot is redrawn from max(0, p - q), normalised;
// when every draft is accepted a bonus token is drawn from the target's next row), so the
// tokens it yields follow the target's distribution whatever the drafter proposes. It draws
// from the same SplitMix64 stream.
//
// Thread-safety: pure functions over caller-owned values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem::models {

// Picks over host logits [rows, vocab] (row-major).
std::vector<int32_t> PickTokens(const float* logits, int64_t rows, int64_t vocab,
                                float temperature, uint64_t* rng_state);

struct SampledVerify {
  int64_t accepted = 0;  // leading drafts kept, 0 .. drafts.size()
  int32_t next = 0;      // the token after them: a redraw, or the bonus token
};

// drafts[i] was drawn from draft_logits row i [n, vocab] at `temperature`; target_logits
// [n + 1, vocab] are the target's rows after the anchor and after each draft.
// REQUIRES: temperature > 0.
SampledVerify VerifyBySampling(const float* draft_logits, const float* target_logits,
                               std::span<const int32_t> drafts, int64_t vocab,
                               float temperature, uint64_t* rng_state);

}  // namespace tandem::models
