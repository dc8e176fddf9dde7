#include "runtime/profile/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace tandem {
namespace {

constexpr double kPercentiles[] = {0, 1, 10, 25, 50, 75, 90, 99, 99.9, 100};

// Nearest rank: the smallest sample with at least p% of the samples <= it.
int64_t ReferencePercentile(std::vector<int64_t> sorted, double p) {
  const size_t n = sorted.size();
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n) / 100.0));
  rank = std::max<size_t>(rank, 1);
  return sorted[rank - 1];
}

TEST(LatencyHistogramTest, ExactBelow256Nanoseconds) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> dist(0, 255);
  for (int n : {1, 2, 7, 100, 1001}) {
    LatencyHistogram h;
    std::vector<int64_t> v;
    for (int i = 0; i < n; ++i) {
      v.push_back(dist(rng));
      h.Add(v.back());
    }
    std::sort(v.begin(), v.end());
    for (double p : kPercentiles) {
      EXPECT_EQ(h.Percentile(p), ReferencePercentile(v, p)) << "n=" << n << " p=" << p;
    }
  }
}

TEST(LatencyHistogramTest, PercentilesMatchSortedReferenceOnRandomData) {
  std::mt19937_64 rng(2);
  // Log-uniform from 1 us to 10 s, the range of real stages.
  std::uniform_real_distribution<double> log_ns(std::log(1e3), std::log(1e10));
  LatencyHistogram h;
  std::vector<int64_t> v;
  int64_t total = 0;
  for (int i = 0; i < 100'000; ++i) {
    v.push_back(static_cast<int64_t>(std::exp(log_ns(rng))));
    total += v.back();
    h.Add(v.back());
  }
  std::sort(v.begin(), v.end());
  for (double p : kPercentiles) {
    const double ref = static_cast<double>(ReferencePercentile(v, p));
    // Bucket midpoint: at most half a bucket (1/256 of the value) from the true sample.
    EXPECT_NEAR(static_cast<double>(h.Percentile(p)), ref, ref / 256.0) << "p=" << p;
  }
  EXPECT_EQ(h.count(), 100'000u);
  EXPECT_EQ(h.total_ns(), total);
  EXPECT_EQ(h.max_ns(), v.back());
  EXPECT_EQ(h.min_ns(), v.front());
  EXPECT_DOUBLE_EQ(h.mean_ns(), static_cast<double>(total) / 100'000);
}

TEST(LatencyHistogramTest, BucketsCoverTheirValues) {
  std::mt19937_64 rng(3);
  int last_bucket = -1;
  int64_t last_value = -1;
  std::vector<int64_t> values;
  for (int i = 0; i < 10'000; ++i) values.push_back(rng() >> (22 + rng() % 41));
  std::sort(values.begin(), values.end());
  for (int64_t v : values) {
    const int b = LatencyHistogram::BucketOf(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, LatencyHistogram::kNumBuckets);
    ASSERT_LE(LatencyHistogram::BucketLower(b), v);
    ASSERT_LT(v, LatencyHistogram::BucketLower(b) + LatencyHistogram::BucketWidth(b));
    ASSERT_LE(LatencyHistogram::BucketWidth(b) * 128, std::max<int64_t>(v, 128)) << v;
    if (v > last_value) {
      ASSERT_GE(b, last_bucket) << "buckets must grow with the value";
    }
    last_bucket = b;
    last_value = v;
  }
}

TEST(LatencyHistogramTest, HugeAndNegativeValuesAreClamped) {
  LatencyHistogram h;
  h.Add(-5);
  h.Add(int64_t{1} << 50);
  EXPECT_EQ(h.min_ns(), 0);
  EXPECT_EQ(h.max_ns(), int64_t{1} << 50);
  EXPECT_EQ(h.Percentile(100), int64_t{1} << 50) << "the top is clamped to the exact max";
  EXPECT_EQ(h.Percentile(50), 0);
}

TEST(LatencyHistogramTest, MergeEqualsAddingEverything) {
  std::mt19937_64 rng(4);
  LatencyHistogram a, b, all;
  for (int i = 0; i < 5000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % 50'000'000);
    (i % 3 ? a : b).Add(v);
    all.Add(v);
  }
  a.Merge(b);
  for (double p : kPercentiles) EXPECT_EQ(a.Percentile(p), all.Percentile(p));
  EXPECT_EQ(a.total_ns(), all.total_ns());
  EXPECT_EQ(a.count(), all.count());
  a.Clear();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.Percentile(50), 0);
  EXPECT_EQ(a.max_ns(), 0);
}

}  // namespace
}  // namespace tandem
