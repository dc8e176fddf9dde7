// Small deterministic random numbers for the data sources: SplitMix64, which gives the same
// sequence on every platform and standard library (std::shuffle and the std distributions
// do not), so a (seed, epoch) pair names one data order everywhere.
//
// Thread-safety: a value; one owner at a time.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tandem::data {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n). REQUIRES: n > 0. The modulo bias is below n / 2^64, irrelevant here.
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// A seed for one stream derived from several parts (seed, epoch, index): each part is
// absorbed through a full SplitMix64 round, so nearby inputs give unrelated seeds.
inline uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0) {
  uint64_t h = SplitMix64(a ^ 0x243f6a8885a308d3ull).Next();
  h = SplitMix64(h ^ b).Next();
  return SplitMix64(h ^ c).Next();
}

// Fisher-Yates over `order` with the given generator.
inline void Shuffle(std::vector<uint32_t>& order, SplitMix64& rng) {
  for (size_t i = order.size(); i > 1; --i) {
    size_t j = rng.Below(i);
    std::swap(order[i - 1], order[j]);
  }
}

}  // namespace tandem::data
