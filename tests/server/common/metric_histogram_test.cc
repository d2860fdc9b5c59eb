#include "server/common/metric_histogram.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// Verifies a value equal to a bound counts in that bound's bucket, buckets are cumulative, a
// negative value counts as 0 and the +Inf bucket equals the count.
TEST(MetricHistogramTest, BucketsAreCumulativeAndBoundsInclusive) {
  MetricHistogram h;
  h.Record(50);       // le 5e-05
  h.Record(51);       // le 0.0001
  h.Record(-7);       // le 5e-05, adds 0 to the sum
  h.Record(2000000);  // past every bound
  std::string out;
  h.AppendSeries(&out, "x_seconds", "node=\"a\"");
  EXPECT_THAT(out, HasSubstr("x_seconds_bucket{node=\"a\",le=\"5e-05\"} 2\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_bucket{node=\"a\",le=\"0.0001\"} 3\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_bucket{node=\"a\",le=\"1\"} 3\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_bucket{node=\"a\",le=\"+Inf\"} 4\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_sum{node=\"a\"} 2.0001\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_count{node=\"a\"} 4\n"));
  EXPECT_EQ(h.count(), 4u);

  std::string bare;
  MetricHistogram().AppendSeries(&bare, "y", "");
  EXPECT_THAT(bare, HasSubstr("y_bucket{le=\"+Inf\"} 0\n"));
  EXPECT_THAT(bare, HasSubstr("y_count 0\n"));
}

// Verifies the bounds counted only for CountAtMost stay out of the text format, which shows the
// same buckets as ever.
TEST(MetricHistogramTest, ShowsOnlyTheShownBounds) {
  MetricHistogram h;
  h.Record(3);
  std::string out;
  h.AppendSeries(&out, "x", "");
  size_t buckets = 0;
  for (size_t at = out.find("x_bucket{"); at != std::string::npos;
       at = out.find("x_bucket{", at + 1)) {
    ++buckets;
  }
  EXPECT_EQ(buckets, MetricHistogram::kShownBoundsUs.size() + 1);
  EXPECT_THAT(out, HasSubstr("x_bucket{le=\"5e-05\"} 1\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("le=\"5e-06\"")));
}

// Verifies CountAtMost is exact at Prometheus' default buckets, in seconds and in milliseconds,
// and an undercount between bounds.
TEST(MetricHistogramTest, CountAtMostIsExactAtDefaultBuckets) {
  MetricHistogram h;
  for (int64_t micros : {4, 5, 6, 2400, 2500, 2600, 499999, 500000, 500001}) {
    h.Record(micros);
  }
  const MetricHistogram::Snapshot counts = h.snapshot();
  bool exact = false;
  EXPECT_EQ(MetricHistogram::CountAtMost(counts, 0.005 * 1000, &exact), 2u);  // 0.005 ms
  EXPECT_TRUE(exact);
  EXPECT_EQ(MetricHistogram::CountAtMost(counts, 2.5 * 1000, &exact), 5u);  // 2.5 ms
  EXPECT_TRUE(exact);
  EXPECT_EQ(MetricHistogram::CountAtMost(counts, 0.5 * 1e6, &exact), 8u);  // 0.5 s
  EXPECT_TRUE(exact);
  // 2600 us is at most 3000 but past the bound below it, 2500: not counted.
  EXPECT_EQ(MetricHistogram::CountAtMost(counts, 3000, &exact), 5u);
  EXPECT_FALSE(exact);
  EXPECT_EQ(MetricHistogram::CountAtMost(counts, 1e12, &exact), 9u);
}

// Verifies observations from several threads are all counted.
TEST(MetricHistogramTest, CountsEveryObservationAcrossThreads) {
  MetricHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 10000; ++i) {
        h.Record(t * 1000 + i % 100);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(h.count(), 40000u);
  EXPECT_EQ(h.snapshot().buckets.back(), 0u);
}

}  // namespace
}  // namespace sluice
