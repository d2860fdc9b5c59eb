#include "server/redis/circuit_breaker.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/common/failure_reason.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

const absl::Status kTimeout = absl::DeadlineExceededError("no reply");  // in flight
const absl::Status kDown = absl::UnavailableError("not connected");
const absl::Status kUnsent = WithFailureReason(absl::DeadlineExceededError("not sent"),
                                               FailureReason::kTimeoutBeforeSend);

class CircuitBreakerTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  CircuitBreaker breaker_{{.failure_threshold = 3, .open_us = 1000000}, clock_};
};

// Verifies the breaker opens after the threshold of node faults in a row, and not before.
TEST_F(CircuitBreakerTest, OpensAfterFailuresInARow) {
  breaker_.Record(kTimeout);
  breaker_.Record(kDown);
  EXPECT_TRUE(breaker_.Allow());
  EXPECT_FALSE(breaker_.open());
  breaker_.Record(kTimeout);
  EXPECT_TRUE(breaker_.open());
  EXPECT_FALSE(breaker_.Allow());
  EXPECT_FALSE(breaker_.Allow());
  EXPECT_EQ(breaker_.opens(), 1u);
  EXPECT_EQ(breaker_.rejected(), 2u);
}

// Verifies a success in between resets the count, and failures that are not the node's (a
// batch this process did not send in time, a script error) count for nothing.
TEST_F(CircuitBreakerTest, OnlyConsecutiveNodeFaultsCount) {
  breaker_.Record(kTimeout);
  breaker_.Record(kTimeout);
  breaker_.Record(absl::OkStatus());
  breaker_.Record(kTimeout);
  breaker_.Record(kUnsent);
  breaker_.Record(absl::InternalError("script error"));
  breaker_.Record(kTimeout);
  EXPECT_FALSE(breaker_.open());
  breaker_.Record(kTimeout);
  EXPECT_TRUE(breaker_.open());
}

// Verifies that after the open period exactly one probe goes; its success closes the breaker.
TEST_F(CircuitBreakerTest, OneProbeAfterTheOpenPeriodClosesIt) {
  for (int i = 0; i < 3; ++i) {
    breaker_.Record(kTimeout);
  }
  clock_.AdvanceMicros(999999);
  EXPECT_FALSE(breaker_.Allow());
  clock_.AdvanceMicros(1);
  EXPECT_TRUE(breaker_.Allow());   // the probe
  EXPECT_FALSE(breaker_.Allow());  // everyone else, while it is out
  breaker_.Record(absl::OkStatus());
  EXPECT_FALSE(breaker_.open());
  EXPECT_TRUE(breaker_.Allow());
  EXPECT_TRUE(breaker_.Allow());
}

// Verifies a failed probe opens the breaker for another whole period.
TEST_F(CircuitBreakerTest, FailedProbeReopens) {
  for (int i = 0; i < 3; ++i) {
    breaker_.Record(kTimeout);
  }
  clock_.AdvanceMicros(1000000);
  ASSERT_TRUE(breaker_.Allow());
  breaker_.Record(kTimeout);
  EXPECT_TRUE(breaker_.open());
  EXPECT_EQ(breaker_.opens(), 2u);
  clock_.AdvanceMicros(999999);
  EXPECT_FALSE(breaker_.Allow());
  clock_.AdvanceMicros(1);
  EXPECT_TRUE(breaker_.Allow());
}

// Verifies a probe that ends without a verdict (not sent in time) lets another probe go, so
// the breaker cannot stay open for good.
TEST_F(CircuitBreakerTest, ProbeWithoutVerdictLetsAnotherGo) {
  for (int i = 0; i < 3; ++i) {
    breaker_.Record(kTimeout);
  }
  clock_.AdvanceMicros(1000000);
  ASSERT_TRUE(breaker_.Allow());
  breaker_.Record(kUnsent);
  EXPECT_TRUE(breaker_.Allow());
}

// Verifies a threshold of 0 disables the breaker.
TEST(CircuitBreakerDisabledTest, ZeroThresholdNeverOpens) {
  FakeClock clock;
  CircuitBreaker breaker({.failure_threshold = 0}, clock);
  for (int i = 0; i < 100; ++i) {
    breaker.Record(kTimeout);
  }
  EXPECT_FALSE(breaker.open());
  EXPECT_TRUE(breaker.Allow());
}

}  // namespace
}  // namespace sluice
