#include "runtime/profile/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tandem {

namespace {
constexpr int64_t kSub = int64_t{1} << LatencyHistogram::kSubBits;
constexpr int64_t kMaxValue = (int64_t{1} << LatencyHistogram::kMaxExponent) - 1;
}  // namespace

int LatencyHistogram::BucketOf(int64_t ns) {
  const uint64_t v = static_cast<uint64_t>(std::clamp<int64_t>(ns, 0, kMaxValue));
  if (v < 2 * kSub) return static_cast<int>(v);  // exact region: one bucket per ns
  const int exponent = std::bit_width(v) - 1;     // >= kSubBits + 1
  const int shift = exponent - kSubBits;
  const int sub = static_cast<int>((v >> shift) & (kSub - 1));
  return static_cast<int>((shift + 1) * kSub) + sub;
}

int64_t LatencyHistogram::BucketLower(int bucket) {
  if (bucket < 2 * kSub) return bucket;
  const int shift = static_cast<int>(bucket / kSub) - 1;
  const int64_t sub = bucket % kSub;
  return (kSub + sub) << shift;
}

int64_t LatencyHistogram::BucketWidth(int bucket) {
  if (bucket < 2 * kSub) return 1;
  return int64_t{1} << (bucket / kSub - 1);
}

void LatencyHistogram::Add(int64_t ns) {
  ns = std::max<int64_t>(ns, 0);
  ++buckets_[BucketOf(ns)];
  ++count_;
  total_ns_ += ns;
  min_ns_ = std::min(min_ns_, ns);
  max_ns_ = std::max(max_ns_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (int i = 0; i < kNumBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  total_ns_ += other.total_ns_;
  min_ns_ = std::min(min_ns_, other.min_ns_);
  max_ns_ = std::max(max_ns_, other.max_ns_);
}

void LatencyHistogram::Clear() {
  buckets_.fill(0);
  count_ = 0;
  total_ns_ = 0;
  min_ns_ = INT64_MAX;
  max_ns_ = 0;
}

int64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  const double clamped = std::clamp(p, 0.0, 100.0);
  const uint64_t rank =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(clamped * static_cast<double>(count_) / 100.0)));
  if (rank >= count_) return max_ns_;  // the top rank is the maximum, known exactly
  uint64_t seen = 0;
  for (int i = 0; i < kNumBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const int64_t mid = BucketLower(i) + (BucketWidth(i) - 1) / 2;
      return std::clamp(mid, min_ns_, max_ns_);
    }
  }
  return max_ns_;
}

}  // namespace tandem
