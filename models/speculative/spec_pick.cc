#include "models/speculative/spec_pick.h"

#include <algorithm>
#include <cmath>

namespace tandem::models {

namespace {

// One 53-bit uniform in [0, 1) from SplitMix64 over *state.
double NextUniform(uint64_t* state) {
  *state += 0x9E3779B97F4A7C15ull;
  uint64_t z = *state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// softmax(row / T) in double.
std::vector<double> Softmax(const float* row, int64_t v, float temperature) {
  const double top = *std::max_element(row, row + v);
  std::vector<double> p(static_cast<size_t>(v));
  double total = 0;
  for (int64_t i = 0; i < v; ++i) total += p[i] = std::exp((double(row[i]) - top) / temperature);
  for (double& x : p) x /= total;
  return p;
}

// Inverse CDF of unnormalised weights `w` at u in [0, 1).
int32_t InverseCdf(const std::vector<double>& w, double u) {
  double total = 0;
  for (double x : w) total += x;
  double acc = 0;
  const double target = u * total;
  for (size_t i = 0; i < w.size(); ++i) {
    acc += w[i];
    if (acc > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(w.size() - 1);
}

}  // namespace

std::vector<int32_t> PickTokens(const float* logits, int64_t rows, int64_t v, float temperature,
                                uint64_t* rng_state) {
  std::vector<int32_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * v;
    const int64_t best = std::max_element(row, row + v) - row;  // first maximum
    if (temperature == 0.0f) {
      out[r] = static_cast<int32_t>(best);
      continue;
    }
    const double u = NextUniform(rng_state);
    double total = 0;
    for (int64_t i = 0; i < v; ++i) total += std::exp((double(row[i]) - row[best]) / temperature);
    double acc = 0, target = u * total;
    int64_t pick = v - 1;
    for (int64_t i = 0; i < v; ++i) {
      acc += std::exp((double(row[i]) - row[best]) / temperature);
      if (acc > target) {
        pick = i;
        break;
      }
    }
    out[r] = static_cast<int32_t>(pick);
  }
  return out;
}

SampledVerify VerifyBySampling(const float* draft_logits, const float* target_logits,
                               std::span<const int32_t> drafts, int64_t v, float temperature,
                               uint64_t* rng_state) {
  SampledVerify out;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const std::vector<double> p = Softmax(target_logits + i * v, v, temperature);
    const std::vector<double> q = Softmax(draft_logits + i * v, v, temperature);
    const int32_t x = drafts[i];
    // Accept with probability min(1, p(x) / q(x)).
    if (NextUniform(rng_state) * q[x] < p[x]) {
      ++out.accepted;
      continue;
    }
    std::vector<double> residual(p.size());
    for (size_t k = 0; k < p.size(); ++k) residual[k] = std::max(0.0, p[k] - q[k]);
    out.next = InverseCdf(residual, NextUniform(rng_state));
    return out;
  }
  const std::vector<double> bonus = Softmax(target_logits + drafts.size() * v, v, temperature);
  out.next = InverseCdf(bonus, NextUniform(rng_state));
  return out;
}

}  // namespace tandem::models
