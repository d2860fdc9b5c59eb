#include "server/xds/log_throttle.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

constexpr int64_t kSecond = 1'000'000;

class LogThrottleTest : public ::testing::Test {
 protected:
  // Whether `kind` is admitted; `skipped_` receives the count when it is.
  bool Admit(const std::string& kind) { return throttle_.Admit(kind, &skipped_); }

  FakeClock clock_;
  LogThrottle throttle_{clock_, {.burst = 3,
                                 .refill = absl::Seconds(5),
                                 .repeat = absl::Minutes(1)}};
  uint64_t skipped_ = 0;
};

// Verifies each new kind is logged while the budget lasts, and that the next line logged after
// a refill says how many were not.
TEST_F(LogThrottleTest, LogsNewKindsWhileTheBudgetLasts) {
  EXPECT_TRUE(Admit("v1"));
  EXPECT_EQ(skipped_, 0u);
  EXPECT_TRUE(Admit("v2"));
  EXPECT_TRUE(Admit("v3"));
  EXPECT_FALSE(Admit("v4"));
  EXPECT_FALSE(Admit("v5"));
  clock_.AdvanceMicros(5 * kSecond - 1);
  EXPECT_FALSE(Admit("v6"));
  clock_.AdvanceMicros(1);
  EXPECT_TRUE(Admit("v7"));
  EXPECT_EQ(skipped_, 3u) << "v4, v5 and v6";
  EXPECT_FALSE(Admit("v8"));
}

// Verifies a flood of distinct events, one every 10 ms for ten minutes, costs the burst and
// then one line per refill interval.
TEST_F(LogThrottleTest, AFloodCostsALineEveryRefillInterval) {
  int admitted = 0;
  uint64_t reported = 0;
  for (int i = 0; i < 60'000; ++i) {
    if (Admit(absl::StrCat("version-", i))) {
      ++admitted;
      reported += skipped_;
    }
    clock_.AdvanceMicros(10'000);
  }
  EXPECT_LE(admitted, 3 + 600 / 5);
  EXPECT_GE(admitted, 600 / 5);
  EXPECT_EQ(reported + admitted + throttle_.TakeSkipped(), 60'000u) << "every event accounted for";
}

// Verifies the kind last logged, seen again, is logged once per repeat interval, spending no
// budget meanwhile: a new kind right after a run of repeats is still logged.
TEST_F(LogThrottleTest, ARepeatedKindIsLoggedOncePerRepeatInterval) {
  EXPECT_TRUE(Admit("same"));
  for (int i = 0; i < 100; ++i) {
    clock_.AdvanceMicros(kSecond / 2);
    EXPECT_FALSE(Admit("same"));
  }
  EXPECT_TRUE(Admit("new"));
  EXPECT_EQ(skipped_, 100u);
  EXPECT_FALSE(Admit("new"));
  clock_.AdvanceMicros(60 * kSecond);
  EXPECT_TRUE(Admit("new"));
  EXPECT_EQ(skipped_, 1u);
}

// Verifies skipped events can be reported by a line of another kind, and are then not
// reported twice.
TEST_F(LogThrottleTest, SkippedEventsAreReportedOnce) {
  for (int i = 0; i < 10; ++i) {
    Admit(absl::StrCat("v", i));
  }
  EXPECT_EQ(throttle_.TakeSkipped(), 7u);
  EXPECT_EQ(throttle_.TakeSkipped(), 0u);
  clock_.AdvanceMicros(5 * kSecond);
  EXPECT_TRUE(Admit("later"));
  EXPECT_EQ(skipped_, 0u);
  EXPECT_EQ(SkippedNote(0), "");
  EXPECT_EQ(SkippedNote(7), "(7 similar not logged) ");
}

}  // namespace
}  // namespace sluice
