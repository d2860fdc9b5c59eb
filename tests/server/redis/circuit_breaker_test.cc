#include "server/redis/circuit_breaker.h"

#include <utility>
#include <vector>

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
  // One open period of a second throughout (see OpenPeriodDoublesFromTheMinimum).
  CircuitBreaker breaker_{{.failure_threshold = 3, .open_us = 1000000, .open_min_us = 1000000},
                          clock_};
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

// Verifies callers' batches never probe: the breaker refuses them all while open, and the probe
// is due, to one claimant, once the open period is over; the probe's batch succeeding (as the
// connection records it) closes the breaker.
TEST_F(CircuitBreakerTest, ProbeIsDueAfterTheOpenPeriodAndItsSuccessCloses) {
  for (int i = 0; i < 3; ++i) {
    breaker_.Record(kTimeout);
  }
  EXPECT_EQ(breaker_.ProbeDueInMicros(), 1000000);
  clock_.AdvanceMicros(999999);
  EXPECT_EQ(breaker_.ProbeDueInMicros(), 1);
  EXPECT_FALSE(breaker_.StartProbe());
  clock_.AdvanceMicros(1);
  EXPECT_FALSE(breaker_.Allow()) << "a caller's batch is never the probe";
  EXPECT_EQ(breaker_.ProbeDueInMicros(), 0);
  EXPECT_TRUE(breaker_.StartProbe());
  EXPECT_FALSE(breaker_.StartProbe()) << "one probe at a time";
  EXPECT_EQ(breaker_.ProbeDueInMicros(), -1);
  EXPECT_FALSE(breaker_.Allow());
  breaker_.Record(absl::OkStatus());
  breaker_.ProbeDone(absl::OkStatus());
  EXPECT_FALSE(breaker_.open());
  EXPECT_TRUE(breaker_.Allow());
  EXPECT_EQ(breaker_.ProbeDueInMicros(), -1);
}

// Verifies a failed probe, whatever the failure, opens the breaker for another whole period,
// and that the listener hears of every opening with the time until the next probe.
TEST_F(CircuitBreakerTest, FailedProbeReopensAndTheListenerHears) {
  std::vector<int64_t> heard;
  CircuitBreaker breaker({.failure_threshold = 3, .open_us = 1000000, .open_min_us = 1000000},
                         clock_);
  breaker.set_open_listener([&](int64_t due_in_us) { heard.push_back(due_in_us); });
  for (int i = 0; i < 3; ++i) {
    breaker.Record(kTimeout);
  }
  clock_.AdvanceMicros(1000000);
  ASSERT_TRUE(breaker.StartProbe());
  breaker.Record(kTimeout);
  breaker.ProbeDone(kTimeout);
  EXPECT_TRUE(breaker.open());
  EXPECT_EQ(breaker.opens(), 2u);
  EXPECT_EQ(breaker.ProbeDueInMicros(), 1000000);
  clock_.AdvanceMicros(1000000);
  ASSERT_TRUE(breaker.StartProbe());
  breaker.ProbeDone(kUnsent);
  EXPECT_EQ(breaker.opens(), 3u);
  EXPECT_EQ(heard, (std::vector<int64_t>{1000000, 1000000, 1000000}));
}

// Verifies failures recorded while open (batches sent before it opened) neither extend the open
// period nor open it again, and a late success from one of them closes it.
TEST_F(CircuitBreakerTest, WhileOpenOnlyTheProbeDecides) {
  for (int i = 0; i < 3; ++i) {
    breaker_.Record(kTimeout);
  }
  clock_.AdvanceMicros(500000);
  for (int i = 0; i < 10; ++i) {
    breaker_.Record(kDown);
  }
  EXPECT_EQ(breaker_.opens(), 1u);
  EXPECT_EQ(breaker_.ProbeDueInMicros(), 500000);
  breaker_.Record(absl::OkStatus());
  EXPECT_FALSE(breaker_.open());
}

// Verifies a streak opens the breaker only once it has lasted min_failing_us: timeouts that all
// expire at one instant (this process was descheduled) are not a node that is down, while the
// same streak spread over the span is.
TEST_F(CircuitBreakerTest, ABurstAtOneInstantDoesNotOpenIt) {
  CircuitBreaker breaker(
      {.failure_threshold = 3, .open_us = 1000000, .open_min_us = 1000000, .min_failing_us = 10000},
      clock_);
  for (int i = 0; i < 8; ++i) {
    breaker.Record(kTimeout);
  }
  EXPECT_FALSE(breaker.open());
  breaker.Record(absl::OkStatus());
  breaker.Record(kTimeout);
  clock_.AdvanceMicros(5000);
  breaker.Record(kTimeout);
  breaker.Record(kTimeout);
  EXPECT_FALSE(breaker.open());
  clock_.AdvanceMicros(5000);
  breaker.Record(kTimeout);
  EXPECT_TRUE(breaker.open());
}

// Verifies the wait for a probe starts at open_min_us and doubles with each failed probe, up to
// open_us, and starts over once the breaker has closed.
TEST_F(CircuitBreakerTest, OpenPeriodDoublesFromTheMinimum) {
  std::vector<int64_t> heard;
  CircuitBreaker breaker({.failure_threshold = 1, .open_us = 300000, .open_min_us = 50000},
                         clock_);
  breaker.set_open_listener([&](int64_t due_in_us) { heard.push_back(due_in_us); });
  breaker.Record(kDown);
  for (int probe = 0; probe < 4; ++probe) {
    clock_.AdvanceMicros(breaker.ProbeDueInMicros());
    ASSERT_TRUE(breaker.StartProbe());
    breaker.ProbeDone(kDown);
  }
  clock_.AdvanceMicros(breaker.ProbeDueInMicros());
  ASSERT_TRUE(breaker.StartProbe());
  breaker.Record(absl::OkStatus());
  breaker.ProbeDone(absl::OkStatus());
  EXPECT_FALSE(breaker.open());
  breaker.Record(kDown);
  EXPECT_EQ(heard, (std::vector<int64_t>{50000, 100000, 200000, 300000, 300000, 50000}));
}

// Verifies a failure window runs from the first failed batch after a success to the next
// success, whatever failed in between, and is counted in the histogram and told to the
// listener; a success with no window open records nothing.
TEST_F(CircuitBreakerTest, FailureWindowRunsFromFirstFailureToNextSuccess) {
  std::vector<std::pair<int64_t, bool>> heard;
  breaker_.set_window_listener(
      [&heard](int64_t window_us, bool answered) { heard.emplace_back(window_us, answered); });
  breaker_.Record(absl::OkStatus());
  EXPECT_EQ(breaker_.failing_since_us(), 0);
  const int64_t start = clock_.MonotonicMicros();
  breaker_.Record(kDown);
  EXPECT_EQ(breaker_.failing_since_us(), start);
  clock_.AdvanceMicros(300000);
  breaker_.Record(kUnsent);
  breaker_.Record(kTimeout);
  breaker_.Record(kTimeout);  // opens the breaker: the window goes on
  EXPECT_TRUE(breaker_.open());
  clock_.AdvanceMicros(400000);
  EXPECT_EQ(breaker_.failing_since_us(), start);
  breaker_.Record(absl::OkStatus());
  EXPECT_EQ(breaker_.failing_since_us(), 0);
  EXPECT_FALSE(breaker_.open());
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], std::make_pair(int64_t{700000}, true));
  const MetricHistogram::Snapshot windows = breaker_.failure_windows();
  bool exact = false;
  EXPECT_EQ(MetricHistogram::CountAtMost(windows, 500000, &exact), 0u);
  EXPECT_EQ(MetricHistogram::CountAtMost(windows, 1000000, &exact), 1u);
  EXPECT_EQ(windows.sum_us, 700000u);
}

// Verifies CloseFailureWindow ends an open window without a success (the node's keys moved),
// and does nothing when none is open.
TEST_F(CircuitBreakerTest, CloseFailureWindowEndsItWithoutASuccess) {
  std::vector<std::pair<int64_t, bool>> heard;
  breaker_.set_window_listener(
      [&heard](int64_t window_us, bool answered) { heard.emplace_back(window_us, answered); });
  breaker_.CloseFailureWindow();
  EXPECT_TRUE(heard.empty());
  breaker_.Record(kDown);
  clock_.AdvanceMicros(2500000);
  breaker_.CloseFailureWindow();
  EXPECT_EQ(breaker_.failing_since_us(), 0);
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], std::make_pair(int64_t{2500000}, false));
  breaker_.Record(absl::OkStatus());  // no window: nothing more
  EXPECT_EQ(heard.size(), 1u);
}

// Verifies Reset closes an open breaker at once and forgets a streak, and that a probe that was
// out and then fails does not reopen it.
TEST_F(CircuitBreakerTest, ResetClosesAndForgets) {
  for (int i = 0; i < 3; ++i) breaker_.Record(kTimeout);
  ASSERT_TRUE(breaker_.open());
  clock_.AdvanceMicros(1000000);
  ASSERT_TRUE(breaker_.StartProbe());
  breaker_.Reset();
  EXPECT_FALSE(breaker_.open());
  EXPECT_TRUE(breaker_.Allow());
  breaker_.ProbeDone(kTimeout);
  EXPECT_FALSE(breaker_.open());
  // A streak begun before the reset does not carry over.
  breaker_.Record(kTimeout);
  breaker_.Record(kTimeout);
  breaker_.Reset();
  breaker_.Record(kTimeout);
  EXPECT_FALSE(breaker_.open());
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
