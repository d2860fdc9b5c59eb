// Tests of the load generator's latency histogram (client/latency_histogram.h).
#include "client/latency_histogram.h"

#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace sluice {
namespace {

using H = LatencyHistogram;

// Verifies that buckets tile the value range with no gap or overlap, each value landing in the
// bucket whose bounds contain it.
TEST(LatencyHistogramTest, BucketsTileTheRange) {
  for (int i = 0; i + 1 < H::kBucketCount; ++i) {
    const int64_t lower = H::BucketLowerBound(i);
    const int64_t width = H::BucketWidth(i);
    ASSERT_EQ(H::BucketLowerBound(i + 1), lower + width) << "bucket " << i;
    ASSERT_EQ(H::BucketIndex(lower), i);
    ASSERT_EQ(H::BucketIndex(lower + width - 1), i);
    // ~1% precision: a bucket is at most 1/128 of its lower bound wide.
    if (lower >= 256) {
      ASSERT_LE(width * 128, lower) << "bucket " << i;
    }
  }
  EXPECT_EQ(H::BucketIndex((int64_t{1} << H::kMaxBits) - 1), H::kBucketCount - 1);
  EXPECT_EQ(H::BucketIndex(int64_t{1} << 62), H::kBucketCount - 1);
  EXPECT_EQ(H::BucketIndex(-5), 0);
}

// Verifies that small values (below 256) are reported exactly.
TEST(LatencyHistogramTest, SmallValuesAreExact) {
  H h;
  for (int v = 1; v <= 200; ++v) {
    h.Record(v);
  }
  EXPECT_EQ(h.count(), 200u);
  EXPECT_EQ(h.ValueAtQuantile(0.5), 100);
  EXPECT_EQ(h.ValueAtQuantile(0.99), 198);
  EXPECT_EQ(h.ValueAtQuantile(1.0), 200);
  EXPECT_EQ(h.ValueAtQuantile(0.0), 1);
  EXPECT_EQ(h.min(), 1);
  EXPECT_EQ(h.max(), 200);
  EXPECT_DOUBLE_EQ(h.Mean(), 100.5);
}

// Verifies that any single value is reported within 0.4% of itself.
TEST(LatencyHistogramTest, ReportsAnyValueWithinItsPrecision) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % (int64_t{1} << (1 + rng() % 39)));
    H h;
    h.Record(v);
    h.Record(1);  // so that clamping to min/max does not make the answer exact
    h.Record(int64_t{1} << 41);
    const int64_t got = h.ValueAtQuantile(0.5);
    ASSERT_LE(std::abs(got - v), v / 256 + 1) << "value " << v;
  }
}

// Verifies the percentiles of a known distribution (1..100000 once each) to 1%.
TEST(LatencyHistogramTest, PercentilesOfAUniformDistribution) {
  H h;
  for (int64_t v = 1; v <= 100000; ++v) {
    h.Record(v * 1000);
  }
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double want = q * 100000 * 1000;
    EXPECT_NEAR(static_cast<double>(h.ValueAtQuantile(q)), want, want * 0.01) << "q " << q;
  }
  EXPECT_EQ(h.max(), 100000 * 1000);
}

// Verifies that merging per-thread histograms equals recording everything into one, and that
// counts recorded in bulk weigh like single records.
TEST(LatencyHistogramTest, MergeEqualsRecordingIntoOne) {
  H all, a, b;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % 50'000'000);
    all.Record(v);
    (i % 2 == 0 ? a : b).Record(v);
  }
  all.Record(12345, 10);
  b.Record(12345, 10);
  H merged;
  merged.Merge(a);
  merged.Merge(b);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  EXPECT_DOUBLE_EQ(merged.Mean(), all.Mean());
  for (double q : {0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    EXPECT_EQ(merged.ValueAtQuantile(q), all.ValueAtQuantile(q)) << "q " << q;
  }
}

// Verifies that values past the last bucket are counted and keep an exact max, and that an
// empty or reset histogram reports zeros.
TEST(LatencyHistogramTest, OverflowEmptyAndReset) {
  H h;
  EXPECT_EQ(h.ValueAtQuantile(0.99), 0);
  EXPECT_EQ(h.max(), 0);
  const int64_t huge = int64_t{1} << 50;
  h.Record(huge);
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(h.max(), huge);
  EXPECT_EQ(h.ValueAtQuantile(1.0), huge);
  h.Reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.ValueAtQuantile(0.5), 0);
}

}  // namespace
}  // namespace sluice
