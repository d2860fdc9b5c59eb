// Properties of the fixed-window algorithm that are awkward to state as case data.
#include "server/algorithm/fixed_window.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "server/algorithm/algorithm.h"
#include "tests/support/algorithm_cases.h"
#include "tests/support/algorithm_properties.h"

namespace sluice {
namespace {

using testing::Admission;
using testing::kCaseBaseUs;
using testing::RandomRequests;
using testing::RunAndCheckCommonProperties;

class FixedWindowTest : public ::testing::Test {
 protected:
  static LimitParams Params(uint64_t limit, int64_t period_us) {
    return {.algorithm = Algorithm::kFixedWindow, .limit = limit, .period_us = period_us};
  }
};

// Verifies, over long random sequences, that no aligned window admits more than the limit and
// that every decision keeps the promises shared by all algorithms.
TEST_F(FixedWindowTest, RandomSequencesNeverExceedLimitPerWindow) {
  const LimitParams all[] = {Params(3, 1'000'000), Params(10, 100'000), Params(100, 60'000'000),
                             Params(1, 1'000'000), Params(7, 250'000)};
  uint64_t seed = 1;
  for (const LimitParams& params : all) {
    SCOPED_TRACE(testing::FormatParams(params));
    const std::vector<Admission> admitted =
        RunAndCheckCommonProperties(params, RandomRequests(params, seed++, 4000));
    std::map<int64_t, uint64_t> per_window;
    uint64_t total = 0;
    for (const Admission& admission : admitted) {
      per_window[admission.now_us / params.period_us] += admission.hits;
      total += admission.hits;
    }
    for (const auto& [window, hits] : per_window) {
      EXPECT_LE(hits, params.limit) << "window " << window;
    }
    EXPECT_GT(total, params.limit) << "the run admitted almost nothing";
  }
}

// Verifies that a limit lowered below the window's count denies everything, including checks,
// with remaining 0 and no unsigned wrap-around.
TEST_F(FixedWindowTest, LimitLoweredBelowCountDeniesUntilNextWindow) {
  FixedWindowState state;
  const int64_t now = kCaseBaseUs + 100;
  ASSERT_TRUE(EvaluateFixedWindow(Params(10, 1'000'000), state, now, 8).allowed);
  const Decision decision = EvaluateFixedWindow(Params(5, 1'000'000), state, now + 1, 0);
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.remaining, 0u);
  EXPECT_EQ(decision.retry_after_us, 1'000'000 - 101);
  EXPECT_TRUE(EvaluateFixedWindow(Params(5, 1'000'000), state, now + 999'900, 5).allowed);
}

// Verifies that hits close to 2^64 neither overflow the count nor get admitted.
TEST_F(FixedWindowTest, HugeHitsDoNotOverflow) {
  FixedWindowState state;
  ASSERT_TRUE(EvaluateFixedWindow(Params(10, 1'000'000), state, kCaseBaseUs, 4).allowed);
  const Decision decision =
      EvaluateFixedWindow(Params(10, 1'000'000), state, kCaseBaseUs, ~uint64_t{0} - 1);
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.remaining, 6u);
  EXPECT_EQ(state.count, 4u);
}

// Verifies that windows align to the epoch before 1970 too (floor, not truncation).
TEST_F(FixedWindowTest, NegativeTimesAlignDownward) {
  FixedWindowState state;
  const Decision decision = EvaluateFixedWindow(Params(2, 1'000'000), state, -1'500'000, 1);
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(state.window_start_us, -2'000'000);
  EXPECT_EQ(decision.reset_after_us, 500'000);
}

// Seconds since the epoch of some UTC dates, as microseconds.
constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kJan31Last = int64_t{1769903999} * kSecond;   // 2026-01-31 23:59:59
constexpr int64_t kFeb1 = int64_t{1769904000} * kSecond;        // 2026-02-01 00:00:00
constexpr int64_t kMar1 = int64_t{1772323200} * kSecond;        // 2026-03-01
constexpr int64_t kLeapDay = int64_t{1835438400} * kSecond;     // 2028-02-29 12:00
constexpr int64_t kMar1Leap = int64_t{1835481600} * kSecond;    // 2028-03-01
constexpr int64_t kNov1 = int64_t{1793491200} * kSecond;        // 2026-11-01
constexpr int64_t kDec31Last = int64_t{1798761599} * kSecond;   // 2026-12-31 23:59:59
constexpr int64_t kJan1 = int64_t{1798761600} * kSecond;        // 2027-01-01

LimitParams CalendarMonths(uint64_t limit, int64_t months) {
  LimitParams params{Algorithm::kFixedWindow, limit, months * kMonthUs, limit};
  params.calendar_months = true;
  return params;
}

// Verifies calendar-month windows start at 00:00 UTC on the 1st and end at the next 1st, for
// months of 28, 29 (a leap year), 31 days and across a year's end, and that several months make
// one window counted from January 1970 (USE_CALENDAR_MONTH_RATE_LIMIT).
TEST_F(FixedWindowTest, CalendarMonthWindowsFollowTheCalendar) {
  const LimitParams month = CalendarMonths(5, 1);
  FixedWindowSpan jan = FixedWindowAt(month, kJan31Last);
  EXPECT_EQ(jan.end_us, kFeb1);
  EXPECT_EQ(jan.end_us - jan.start_us, int64_t{31} * 86400 * kSecond);
  EXPECT_EQ(jan.index, 56 * 12);
  FixedWindowSpan feb = FixedWindowAt(month, kFeb1);
  EXPECT_EQ(feb.start_us, kFeb1);
  EXPECT_EQ(feb.end_us, kMar1);  // 28 days
  EXPECT_EQ(feb.index, 56 * 12 + 1);
  FixedWindowSpan leap = FixedWindowAt(month, kLeapDay);
  EXPECT_EQ(leap.end_us, kMar1Leap);
  EXPECT_EQ(leap.end_us - leap.start_us, int64_t{29} * 86400 * kSecond);
  EXPECT_EQ(FixedWindowAt(month, kDec31Last).end_us, kJan1);
  EXPECT_EQ(FixedWindowAt(month, kJan1).index, 57 * 12);
  // Before the epoch: December 1969 is month -1.
  EXPECT_EQ(FixedWindowAt(month, -1).index, -1);
  EXPECT_EQ(FixedWindowAt(month, -1).end_us, 0);
  // Two months a window: November and December 2026 are one (months 682 and 683).
  const LimitParams two = CalendarMonths(5, 2);
  EXPECT_EQ(FixedWindowAt(two, kNov1).start_us, kNov1);
  EXPECT_EQ(FixedWindowAt(two, kDec31Last).start_us, kNov1);
  EXPECT_EQ(FixedWindowAt(two, kDec31Last).end_us, kJan1);
  EXPECT_EQ(FixedWindowAt(two, kJan1).start_us, kJan1);
  // Without calendar months a month rule is 30 days from the epoch, as upstream's default.
  LimitParams thirty = month;
  thirty.calendar_months = false;
  EXPECT_EQ(FixedWindowAt(thirty, kFeb1).start_us % kMonthUs, 0);
}

// Verifies a calendar-month window counts to the end of its month and starts fresh on the 1st:
// a request at 23:59:59 on January 31st is told to wait one second, and one at 00:00 on
// February 1st is admitted.
TEST_F(FixedWindowTest, CalendarMonthResetsOnTheFirst) {
  const LimitParams month = CalendarMonths(2, 1);
  FixedWindowState state;
  ASSERT_TRUE(EvaluateFixedWindow(month, state, kJan31Last - 10 * kSecond, 2).allowed);
  const Decision denied = EvaluateFixedWindow(month, state, kJan31Last, 1);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after_us, kSecond);
  const Decision admitted = EvaluateFixedWindow(month, state, kFeb1, 1);
  EXPECT_TRUE(admitted.allowed);
  EXPECT_EQ(admitted.remaining, 1u);
  EXPECT_EQ(admitted.reset_after_us, kMar1 - kFeb1);
}

// Verifies a limit of 0 and a request no rule can hold report, for a fixed window, the rest of
// the window (when its count starts again, as envoyproxy/ratelimit's reset), and one period for
// the algorithms without windows.
TEST_F(FixedWindowTest, NoLimitWaitIsTheWindowsRest) {
  const LimitParams minute = Params(0, 60 * kSecond);
  EXPECT_EQ(ZeroLimitDecision(minute, 1, kFeb1 + 15 * kSecond).retry_after_us, 45 * kSecond);
  EXPECT_EQ(NeverAdmittedDecision(Params(3, 60 * kSecond), kFeb1 + 59 * kSecond).retry_after_us,
            kSecond);
  EXPECT_TRUE(NeverAdmittedDecision(Params(3, 60 * kSecond), kFeb1).never);
  EXPECT_EQ(ZeroLimitDecision(CalendarMonths(0, 1), 1, kJan31Last).reset_after_us, kSecond);
  LimitParams bucket = Params(0, 60 * kSecond);
  bucket.algorithm = Algorithm::kTokenBucket;
  EXPECT_EQ(ZeroLimitDecision(bucket, 1, kFeb1 + 15 * kSecond).retry_after_us, 60 * kSecond);
}

}  // namespace
}  // namespace sluice
