#include "server/quota/subscription.h"

#include "gtest/gtest.h"

namespace sluice::quota {
namespace {

constexpr int64_t kSecond = 1'000'000;

// Verifies demand as Envoy reports it (getUsageFromBucket): the immediate report of a new bucket
// (0 s, one request) measures nothing; the ticks that follow every 5 s are measured on the
// server's clock, so a tick whose time_elapsed Envoy truncated to 4 s does not read 25% high.
TEST(SubscriptionTest, DemandIsMeasuredOnTheServersClock) {
  Subscription sub;
  int64_t now = 100 * kSecond;
  sub.AddReport(1, 0, now);
  EXPECT_EQ(sub.Demand(), 0);
  EXPECT_EQ(sub.interval_us(), Subscription::kDefaultIntervalUs);
  now += 4'900'000;  // the first tick, 4.9 s after the bucket was made: reported as 4 s
  sub.AddReport(490, 4 * kSecond, now);
  EXPECT_NEAR(sub.Demand(), 100, 1e-9);
  for (int i = 0; i < 5; ++i) {
    now += 5 * kSecond;
    sub.AddReport(500, 4 * kSecond, now);  // 5 s, truncated from 5.0x
  }
  EXPECT_NEAR(sub.Demand(), 100, 1e-9);
  EXPECT_EQ(sub.interval_us(), 5 * kSecond);
  EXPECT_EQ(sub.idle_reports(), 0u);
}

// Verifies the first report of a subscription that is not a new bucket (a reconnect: Envoy's
// report after its stream was reopened): its whole seconds are taken with half a second more.
TEST(SubscriptionTest, AFirstReportOfWholeSecondsCountsHalfASecondMore) {
  Subscription sub;
  sub.AddReport(450, 4 * kSecond, 10 * kSecond);
  EXPECT_NEAR(sub.Demand(), 100, 1e-9);
  Subscription exact;  // a client that sends exact durations
  exact.AddReport(450, 4'500'000, 10 * kSecond);
  EXPECT_NEAR(exact.Demand(), 100, 1e-9);
}

// Verifies that two reports at once (the immediate report and a tick right after) make one
// measure: the second's requests count with the next measure, whose time starts at the first.
TEST(SubscriptionTest, ReportsTooCloseToMeasureJoinTheNext) {
  Subscription sub;
  sub.AddReport(1, 0, 10 * kSecond);
  sub.AddReport(3, 0, 10 * kSecond + 20'000);
  EXPECT_EQ(sub.Demand(), 0);
  sub.AddReport(497, 5 * kSecond, 15 * kSecond);
  EXPECT_NEAR(sub.Demand(), 100, 1e-9);
}

// Verifies idle counting and the interval's range: reports with no request count up, one with
// a request resets; a measured interval is held to [1 s, 60 s] whatever the gaps.
TEST(SubscriptionTest, IdleReportsAndTheIntervalsRange) {
  Subscription sub;
  int64_t now = 10 * kSecond;
  sub.AddReport(1, 0, now);
  EXPECT_TRUE(sub.busy());  // the immediate report counts the bucket's first request
  for (uint32_t i = 1; i <= 3; ++i) {
    now += 5 * kSecond;
    sub.AddReport(0, 5 * kSecond, now);
    EXPECT_EQ(sub.idle_reports(), i);
    EXPECT_FALSE(sub.busy());
  }
  for (int i = 0; i < 3; ++i) {  // a client reporting every half second
    now += 500'000;
    sub.AddReport(1, 0, now);
  }
  EXPECT_EQ(sub.idle_reports(), 0u);
  EXPECT_TRUE(sub.busy());
  EXPECT_EQ(sub.interval_us(), Subscription::kMinIntervalUs);
  now += 3600 * kSecond;
  sub.AddReport(1, 3600 * kSecond, now);
  EXPECT_EQ(sub.interval_us(), Subscription::kMaxIntervalUs);
  EXPECT_EQ(sub.last_report_us(), now);
}

// Verifies the interval at every phase of Envoy's report timer (global_client_impl.cc:
// createBucketImpl reports a new bucket at once, onSendReportsTimer every 5 s from the first
// bucket): whether the bucket's first tick comes 10 ms or 4.99 s after its immediate report,
// the interval read is 5 s, never that gap; and one early report (a reconnect's) does not
// shorten it. The subscription settles once three gaps between ticks were measured.
TEST(SubscriptionTest, TheIntervalIsMeasuredBetweenTicksAtAnyPhase) {
  for (int64_t phase_us : {10'000, 150'000, 700'000, 1'600'000, 2'500'000, 4'990'000}) {
    Subscription sub;
    int64_t now = 10 * kSecond;
    sub.AddReport(1, 0, now);
    now += phase_us;
    sub.AddReport(20 * phase_us / kSecond + 1, phase_us / kSecond * kSecond, now);
    EXPECT_EQ(sub.interval_us(), Subscription::kDefaultIntervalUs) << phase_us;
    EXPECT_FALSE(sub.settled()) << phase_us;
    for (int tick = 1; tick <= 4; ++tick) {
      now += 5 * kSecond;
      sub.AddReport(100, 4 * kSecond, now);
      EXPECT_EQ(sub.interval_us(), 5 * kSecond) << phase_us << " tick " << tick;
      // A tick within 100 ms of the immediate report joins it (ReportsTooCloseToMeasure...):
      // the gap after it is still no interval.
      EXPECT_EQ(sub.settled(), tick >= (phase_us < 100'000 ? 4 : 3)) << phase_us << " " << tick;
      EXPECT_TRUE(sub.busy());
    }
    now += 1'200'000;  // an early report: the longest of the last gaps stays
    sub.AddReport(24, kSecond, now);
    EXPECT_EQ(sub.interval_us(), 5 * kSecond) << phase_us;
    EXPECT_NEAR(sub.Demand(), 20, 0.5) << phase_us;
  }
}

}  // namespace
}  // namespace sluice::quota
