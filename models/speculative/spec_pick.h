// The token-picking rules of speculative decoding, shared by DFlashDecoder and
// DFlashBatchDecoder so both draw the same tokens.
//
// Temperature 0 (greedy): each row's argmax (ties: the lowest id).
//
// Temperature T > 0 (speculative sampling, Leviathan et al. 2023 / Chen et al. 2023):
//   * a logit row becomes a filtered distribution (FilterLogits): logits / T, then top-k (the
//     k largest, ties to the lower id; 0 = off), softmax over what is left, then top-p (the
//     fewest most likely tokens whose mass reaches p, always at least one), renormalised —
//     the order SGLang and vLLM apply to the target's logits; the same filter is applied to
//     the drafter's rows and the target's rows;
//   * the drafter proposes each draft by sampling its filtered distribution q;
//   * the target keeps draft x with probability min(1, p(x) / q(x)); at the first rejection
//     it draws from max(0, p - q) normalised, and when every draft is kept it draws the bonus
//     token from its next row's p. The tokens that come out then follow the target's filtered
//     distribution whatever the drafter proposes.
// At T = 0 the same functions reduce to greedy: a filtered distribution is one-hot at the
// argmax, a draft is kept exactly when it equals the target's argmax, and the redraw is that
// argmax.
//
// Randomness: every draw is a pure function of (seed, prompt, step, position, kind) through
// Philox4x32-10 (kernels/random/philox.h), never of the order in which prompts, batches or
// threads run, so a decode repeats bit for bit. Step 0 is the prefill's pick, step s >= 1 the
// s-th verify step of that prompt; position j is block slot j (1 .. B-1 for drafts, up to B
// for the bonus token); the kind keeps the proposal, the acceptance test and the redraw of
// one slot apart.
//
// Thread-safety: pure functions over caller-owned values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::models {

// How tokens are drawn. Defaults: greedy.
struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy; > 0 and finite
  float top_p = 1.0f;        // (0, 1]; 1 = off
  int64_t top_k = 0;         // >= 0; 0 = off
};

// InvalidArgument naming the field and its range when a value is out of range.
Status CheckSamplingParams(const SamplingParams& p);

// Greedy picks over host logits [rows, vocab] (row-major): each row's first maximum.
std::vector<int32_t> ArgmaxRows(const float* logits, int64_t rows, int64_t vocab);

// A filtered distribution: candidate ids in ascending order and their probabilities (> 0,
// summing to 1). Tokens outside `ids` have probability 0.
struct TokenDist {
  std::vector<int32_t> ids;
  std::vector<double> probs;
  double Prob(int32_t id) const;
};

// The distribution one row of logits [vocab] gives under `p` (one-hot at the argmax when
// temperature is 0). Probabilities are computed in double.
TokenDist FilterLogits(const float* row, int64_t vocab, const SamplingParams& p);

// FilterLogits over a row's top-k candidates only (kernels/elementwise/row_topk.h: ids in
// ascending order, vals their logits), REQUIRES p.top_k == k: the same distribution, bit for
// bit, as FilterLogits over the whole row, without the row.
TokenDist FilterCandidates(const int32_t* ids, const float* vals, int64_t k,
                           const SamplingParams& p);

// One-hot distributions at `ids`: q of drafts the drafter took greedily.
std::vector<TokenDist> OneHot(std::span<const int32_t> ids);

// The key of one prompt's draws at one step.
struct DrawKey {
  uint64_t seed = 0;
  uint64_t prompt = 0;  // the prompt's index in its set
  uint32_t step = 0;    // 0: the prefill's pick; s >= 1: the s-th verify step
};
enum class DrawKind : uint32_t { kPropose = 0, kAccept = 1, kRedraw = 2 };
// A uniform double in [0, 1) with 53 random bits; position < 2^30.
double KeyedUniform(const DrawKey& key, uint32_t position, DrawKind kind);

// Inverse-CDF draw from `d` (ids in ascending order) at u in [0, 1).
int32_t SampleDist(const TokenDist& d, double u);

struct SampledVerify {
  int64_t accepted = 0;  // leading drafts kept, 0 .. drafts.size()
  int32_t next = 0;      // the token after them: a redraw, or the bonus token
};

// drafts[i] (block slot i + 1) was drawn from draft[i]; target[i] (drafts.size() + 1 rows)
// is the target's distribution after the anchor (i = 0) and after draft i. Draws use
// `key` at position i + 1 (kAccept for slot i + 1's test, kRedraw for the token it yields).
// REQUIRES: draft.size() == drafts.size(), target.size() == drafts.size() + 1.
SampledVerify VerifyBySampling(std::span<const TokenDist> draft, std::span<const TokenDist> target,
                               std::span<const int32_t> drafts, const DrawKey& key);

}  // namespace tandem::models
