// LatencyHistogram: a fixed-size log-linear histogram of durations in nanoseconds.
//
// Values below 256 ns are counted exactly; above, each power of two is split into 128
// buckets, so a reported percentile is within 1/256 (0.4%) of the true sample at that rank
// (bucket midpoint, clamped to the observed min and max). Durations beyond 2^42 ns (73 min)
// share the last bucket; max stays exact. Adding a value never allocates.
//
// Percentiles use the nearest-rank definition: Percentile(p) is the smallest recorded value
// v such that at least p% of the samples are <= v.
//
// Thread-safety: none; callers serialise (ProfileStats guards each stage with a mutex).
#pragma once

#include <array>
#include <cstdint>

namespace tandem {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr int kMaxExponent = 42;
  static constexpr int kNumBuckets = (kMaxExponent - kSubBits + 1) << kSubBits;

  // Negative durations count as 0.
  void Add(int64_t ns);
  // Adds every sample of `other`.
  void Merge(const LatencyHistogram& other);
  void Clear();

  uint64_t count() const { return count_; }
  int64_t total_ns() const { return total_ns_; }
  int64_t min_ns() const { return count_ ? min_ns_ : 0; }
  int64_t max_ns() const { return max_ns_; }
  double mean_ns() const { return count_ ? static_cast<double>(total_ns_) / count_ : 0.0; }
  // p in [0, 100]; 0 if empty.
  int64_t Percentile(double p) const;

  // Bucket index of a value and the range [lower, lower + width) it covers (for tests).
  static int BucketOf(int64_t ns);
  static int64_t BucketLower(int bucket);
  static int64_t BucketWidth(int bucket);

 private:
  std::array<uint64_t, kNumBuckets> buckets_{};
  uint64_t count_ = 0;
  int64_t total_ns_ = 0;
  int64_t min_ns_ = INT64_MAX;
  int64_t max_ns_ = 0;
};

}  // namespace tandem
