#include "server/process/backend_wait.h"

#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::Optional;

const absl::Time kStart = absl::FromUnixSeconds(1000);

BackendWaitSettings Schedule(absl::Duration initial, absl::Duration max,
                             absl::Duration max_elapsed = absl::ZeroDuration()) {
  BackendWaitSettings settings;
  settings.enabled = true;
  settings.initial_interval = initial;
  settings.max_interval = max;
  settings.max_elapsed = max_elapsed;
  return settings;
}

// The wait in seconds, or -1 for none (give up).
double Seconds(std::optional<absl::Duration> wait) {
  return wait.has_value() ? absl::ToDoubleSeconds(*wait) : -1;
}

// Verifies the waits as upstream's jpillora/backoff draws them (Min 1s, Max 30s, Factor 2,
// Jitter): the n-th is min + u * (min * 2^n - min), so the first is always min, and a draw past
// the max is the max.
TEST(BackendWaitScheduleTest, DrawsAsUpstreamsBackoff) {
  std::vector<double> draws = {0.5, 0.5, 0.5, 0.0, 0.99, 0.99, 0.1};
  size_t next = 0;
  BackendWaitSchedule schedule(Schedule(absl::Seconds(1), absl::Seconds(30)), kStart,
                               [&] { return draws[next++]; });
  const absl::Time now = kStart + absl::Hours(1);  // no max elapsed: never gives up
  const double expected[] = {
      1,      // [1, 1): min whatever the draw
      1.5,    // [1, 2)
      2.5,    // [1, 4)
      1,      // [1, 8)
      15.85,  // [1, 16)
      30,     // [1, 32): 31.69 drawn, held to the max
      7.3,    // [1, 64)
  };
  for (double seconds : expected) {
    EXPECT_NEAR(Seconds(schedule.AfterSilentCheck(now)), seconds, 1e-6);
  }
  EXPECT_EQ(schedule.silent_checks(), 7);
  EXPECT_EQ(next, draws.size());
}

// Verifies the max draws past 2^64 * min stay the max (no overflow), and an initial interval at
// or above the max makes every wait the max without a draw.
TEST(BackendWaitScheduleTest, HeldToTheMax) {
  BackendWaitSchedule schedule(Schedule(absl::Milliseconds(100), absl::Seconds(5)), kStart,
                               [] { return 0.999; });
  std::optional<absl::Duration> wait;
  for (int i = 0; i < 200; ++i) {
    wait = schedule.AfterSilentCheck(kStart);
  }
  EXPECT_THAT(wait, Optional(absl::Seconds(5)));
  int draws = 0;
  BackendWaitSchedule flat(Schedule(absl::Seconds(10), absl::Seconds(5)), kStart, [&] {
    ++draws;
    return 0.5;
  });
  EXPECT_THAT(flat.AfterSilentCheck(kStart), Optional(absl::Seconds(5)));
  EXPECT_THAT(flat.AfterSilentCheck(kStart), Optional(absl::Seconds(5)));
  EXPECT_EQ(draws, 0);
}

// Verifies the max elapsed time: a silent check before it gets a wait, one at or after it gives
// up (upstream's retryOrDie: elapsed >= max, checked after each failed attempt).
TEST(BackendWaitScheduleTest, GivesUpOnceTheMaxElapsedTimeHasPassed) {
  BackendWaitSchedule schedule(Schedule(absl::Seconds(1), absl::Seconds(30), absl::Seconds(5)),
                               kStart, [] { return 0.0; });
  EXPECT_TRUE(schedule.AfterSilentCheck(kStart + absl::Milliseconds(4999)).has_value());
  EXPECT_EQ(schedule.AfterSilentCheck(kStart + absl::Seconds(5)), std::nullopt);
  EXPECT_EQ(schedule.AfterSilentCheck(kStart + absl::Seconds(60)), std::nullopt);
  EXPECT_EQ(schedule.silent_checks(), 3);
}

}  // namespace
}  // namespace sluice
