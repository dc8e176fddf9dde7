#include "models/speculative/spec_pick.h"

#include <algorithm>
#include <cmath>

namespace tandem::models {

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
    *rng_state += 0x9E3779B97F4A7C15ull;
    uint64_t z = *rng_state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
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

}  // namespace tandem::models
