#include "server/redis/backoff.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// Verifies the lowest draws double from min/2 and stop at max/2.
TEST(ExponentialBackoffTest, DoublesUpToMax) {
  ExponentialBackoff backoff(1000, 8000, [] { return uint64_t{0}; });
  EXPECT_EQ(backoff.NextDelayMicros(), 500);
  EXPECT_EQ(backoff.NextDelayMicros(), 1000);
  EXPECT_EQ(backoff.NextDelayMicros(), 2000);
  EXPECT_EQ(backoff.NextDelayMicros(), 4000);
  EXPECT_EQ(backoff.NextDelayMicros(), 4000);
  EXPECT_EQ(backoff.attempts(), 5);
}

// Verifies jitter stays within [step/2, step], reaching both ends.
TEST(ExponentialBackoffTest, JitterStaysInUpperHalf) {
  uint64_t next = 0;
  ExponentialBackoff backoff(1000, 1000, [&next] { return next++; });
  int64_t lowest = INT64_MAX;
  int64_t highest = 0;
  for (int i = 0; i < 2000; ++i) {
    int64_t delay = backoff.NextDelayMicros();
    lowest = std::min(lowest, delay);
    highest = std::max(highest, delay);
  }
  EXPECT_EQ(lowest, 500);
  EXPECT_EQ(highest, 1000);
}

// Verifies Reset starts over, and many failures do not overflow.
TEST(ExponentialBackoffTest, ResetsAndNeverOverflows) {
  ExponentialBackoff backoff(20000, 2000000, [] { return ~uint64_t{0}; });
  for (int i = 0; i < 200; ++i) {
    int64_t delay = backoff.NextDelayMicros();
    EXPECT_GT(delay, 0);
    EXPECT_LE(delay, 2000000);
  }
  backoff.Reset();
  EXPECT_LE(backoff.NextDelayMicros(), 20000);
}

}  // namespace
}  // namespace sluice
