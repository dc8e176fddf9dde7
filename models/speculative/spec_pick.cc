#include "models/speculative/spec_pick.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/random/philox.h"

namespace tandem::models {

Status CheckSamplingParams(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return InvalidArgumentError("temperature must be finite and >= 0, got {}", p.temperature);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return InvalidArgumentError("top_p must be in (0, 1] (1: off), got {}", p.top_p);
  if (p.top_k < 0) return InvalidArgumentError("top_k must be >= 0 (0: off), got {}", p.top_k);
  return Status::Ok();
}

std::vector<int32_t> ArgmaxRows(const float* logits, int64_t rows, int64_t v) {
  std::vector<int32_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * v;
    out[r] = static_cast<int32_t>(std::max_element(row, row + v) - row);  // first maximum
  }
  return out;
}

double TokenDist::Prob(int32_t id) const {
  const auto it = std::lower_bound(ids.begin(), ids.end(), id);
  return it != ids.end() && *it == id ? probs[it - ids.begin()] : 0.0;
}

namespace {

// How many of `order` (candidates, most likely first once sorted) top-p keeps: the fewest
// whose mass reaches p. Sorts only as much of `order` as it needs, growing the sorted head
// geometrically (the head is usually short).
template <typename Before>
size_t TopPCount(std::vector<int32_t>* order, const std::vector<double>& prob, double p,
                 Before before) {
  const size_t n = order->size();
  size_t sorted = 0;
  double mass = 0;
  for (size_t head = std::min<size_t>(n, 64);; head = std::min(n, head * 8)) {
    std::partial_sort(order->begin() + sorted, order->begin() + head, order->end(), before);
    for (; sorted < head; ++sorted) {
      mass += prob[(*order)[sorted]];
      if (mass >= p) return sorted + 1;
    }
    if (head == n) return n;
  }
}

}  // namespace

TokenDist FilterLogits(const float* row, int64_t v, const SamplingParams& p) {
  TokenDist d;
  const int32_t best = static_cast<int32_t>(std::max_element(row, row + v) - row);
  if (p.temperature == 0.0f) {
    d.ids = {best};
    d.probs = {1.0};
    return d;
  }
  // Candidate order: higher logit first, the lower id on ties.
  auto before = [row](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  };
  std::vector<int32_t> cand(static_cast<size_t>(v));
  std::iota(cand.begin(), cand.end(), 0);
  if (p.top_k > 0 && p.top_k < v) {
    std::nth_element(cand.begin(), cand.begin() + (p.top_k - 1), cand.end(), before);
    cand.resize(static_cast<size_t>(p.top_k));
    std::sort(cand.begin(), cand.end());  // sums in id order, as FilterCandidates does
  }
  // Softmax over the candidates (the argmax is always one of them), indexed by position.
  std::vector<double> prob(cand.size());
  double total = 0;
  for (size_t i = 0; i < cand.size(); ++i)
    total += prob[i] = std::exp((double(row[cand[i]]) - double(row[best])) / p.temperature);
  for (double& x : prob) x /= total;
  std::vector<int32_t> keep(cand.size());
  std::iota(keep.begin(), keep.end(), 0);  // positions into cand
  if (p.top_p < 1.0f) {
    auto by_prob = [&](int32_t a, int32_t b) { return before(cand[a], cand[b]); };
    keep.resize(TopPCount(&keep, prob, p.top_p, by_prob));
  }
  std::sort(keep.begin(), keep.end(), [&](int32_t a, int32_t b) { return cand[a] < cand[b]; });
  double kept = 0;
  for (int32_t i : keep)
    if (prob[i] > 0) {
      d.ids.push_back(cand[i]);
      d.probs.push_back(prob[i]);
      kept += prob[i];
    }
  for (double& x : d.probs) x /= kept;
  return d;
}

TokenDist FilterCandidates(const int32_t* ids, const float* vals, int64_t k,
                           const SamplingParams& p) {
  SamplingParams rest = p;
  rest.top_k = 0;  // the candidates are the top-k already
  TokenDist d = FilterLogits(vals, k, rest);
  for (int32_t& id : d.ids) id = ids[id];  // positions to ids: both ascending
  return d;
}

std::vector<TokenDist> OneHot(std::span<const int32_t> ids) {
  std::vector<TokenDist> out;
  for (int32_t id : ids) out.push_back({{id}, {1.0}});
  return out;
}

double KeyedUniform(const DrawKey& key, uint32_t position, DrawKind kind) {
  const kernels::Philox4 c{{(position << 2) | static_cast<uint32_t>(kind), key.step,
                            static_cast<uint32_t>(key.prompt),
                            static_cast<uint32_t>(key.prompt >> 32)}};
  const kernels::Philox4 r = kernels::Philox4x32_10(c, static_cast<uint32_t>(key.seed),
                                                    static_cast<uint32_t>(key.seed >> 32));
  const uint64_t bits = (uint64_t{r.v[0]} << 32 | r.v[1]) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

int32_t SampleDist(const TokenDist& d, double u) {
  const double target = u * std::accumulate(d.probs.begin(), d.probs.end(), 0.0);
  double acc = 0;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    acc += d.probs[i];
    if (acc > target) return d.ids[i];
  }
  return d.ids.back();
}

namespace {

// max(0, p - q) over the union of both supports (unnormalised; SampleDist normalises). When
// it is empty (p == q up to rounding, where a rejection cannot happen) it is p itself.
TokenDist Residual(const TokenDist& p, const TokenDist& q) {
  TokenDist r;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const double x = p.probs[i] - q.Prob(p.ids[i]);
    if (x > 0) {
      r.ids.push_back(p.ids[i]);
      r.probs.push_back(x);
    }
  }
  return r.ids.empty() ? p : r;
}

}  // namespace

SampledVerify VerifyBySampling(std::span<const TokenDist> draft, std::span<const TokenDist> target,
                               std::span<const int32_t> drafts, const DrawKey& key) {
  SampledVerify out;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const uint32_t pos = static_cast<uint32_t>(i + 1);
    const int32_t x = drafts[i];
    // Keep with probability min(1, p(x) / q(x)).
    if (KeyedUniform(key, pos, DrawKind::kAccept) * draft[i].Prob(x) < target[i].Prob(x)) {
      ++out.accepted;
      continue;
    }
    out.next = SampleDist(Residual(target[i], draft[i]), KeyedUniform(key, pos, DrawKind::kRedraw));
    return out;
  }
  const uint32_t pos = static_cast<uint32_t>(drafts.size() + 1);
  out.next = SampleDist(target[drafts.size()], KeyedUniform(key, pos, DrawKind::kRedraw));
  return out;
}

}  // namespace tandem::models
