// Properties of the sliding-window-counter algorithm that are awkward to state as case data.
#include "server/algorithm/sliding_window_counter.h"

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

class SlidingWindowCounterTest : public ::testing::Test {
 protected:
  static LimitParams Params(uint64_t limit, int64_t period_us) {
    return {.algorithm = Algorithm::kSlidingWindowCounter, .limit = limit, .period_us = period_us};
  }
};

// Verifies, over long random sequences, that each admission kept the weighted estimate
// (recomputed from the admissions themselves) within the limit, that no aligned window admits
// more than the limit, and that every decision keeps the promises shared by all algorithms.
TEST_F(SlidingWindowCounterTest, RandomSequencesKeepWeightedEstimateWithinLimit) {
  const LimitParams all[] = {Params(3, 1'000'000), Params(10, 100'000), Params(100, 60'000'000),
                             Params(1, 1'000'000), Params(7, 250'000)};
  uint64_t seed = 201;
  for (const LimitParams& params : all) {
    SCOPED_TRACE(testing::FormatParams(params));
    const std::vector<Admission> admitted =
        RunAndCheckCommonProperties(params, RandomRequests(params, seed++, 4000));
    std::map<int64_t, uint64_t> per_window;
    for (const Admission& admission : admitted) {
      const int64_t window = admission.now_us / params.period_us;
      per_window[window] += admission.hits;
      const double elapsed = static_cast<double>(admission.now_us % params.period_us);
      const double period = static_cast<double>(params.period_us);
      const double previous = static_cast<double>(per_window[window - 1]);
      const double estimate =
          previous * (period - elapsed) / period + static_cast<double>(per_window[window]);
      ASSERT_LE(estimate, static_cast<double>(params.limit) + 1e-9)
          << "admission at base+" << admission.now_us - kCaseBaseUs;
    }
    EXPECT_GT(admitted.size(), params.limit) << "the run admitted almost nothing";
  }
}

// Verifies that a retry found in the next window accounts for the previous window's weight:
// limit 10 used up late in a window is retried where 10 * (P - e) / P + 1 <= 10.
TEST_F(SlidingWindowCounterTest, RetryCrossesIntoNextWindow) {
  SlidingWindowCounterState state;
  const LimitParams params = Params(10, 1'000'000);
  ASSERT_TRUE(EvaluateSlidingWindowCounter(params, state, kCaseBaseUs + 900'000, 10).allowed);
  const Decision decision = EvaluateSlidingWindowCounter(params, state, kCaseBaseUs + 950'000, 1);
  EXPECT_FALSE(decision.allowed);
  // Next window starts at +1s; 10 * (1e6 - e) / 1e6 <= 9 from e = 100'000.
  EXPECT_EQ(decision.retry_after_us, 50'000 + 100'000);
  EXPECT_TRUE(EvaluateSlidingWindowCounter(params, state, kCaseBaseUs + 1'100'000, 1).allowed);
}

// Verifies that retry_after stays exact when the weight of one previous hit per microsecond is
// below the rounding of the limit (1e6 per day), so the doubles admit a few microseconds before
// the analytic answer.
TEST_F(SlidingWindowCounterTest, RetryExactWhenWeightIsBelowRounding) {
  const LimitParams params = Params(1'000'000, 86'400'000'000);
  SlidingWindowCounterState state;
  const int64_t now = kCaseBaseUs + 3'600'000'000;
  ASSERT_TRUE(EvaluateSlidingWindowCounter(params, state, now, 1).allowed);
  const Decision decision = EvaluateSlidingWindowCounter(params, state, now, 1'000'000);
  ASSERT_FALSE(decision.allowed);
  // Exactly, the full limit fits only once the lone hit has left the trailing day: at 2P.
  EXPECT_LT(decision.retry_after_us, 2 * 86'400'000'000 - 3'600'000'000);
  SlidingWindowCounterState copy = state;
  EXPECT_TRUE(
      EvaluateSlidingWindowCounter(params, copy, now + decision.retry_after_us, 1'000'000).allowed);
  copy = state;
  EXPECT_FALSE(
      EvaluateSlidingWindowCounter(params, copy, now + decision.retry_after_us - 1, 1'000'000)
          .allowed);
}

// Verifies that a state two or more windows old counts as empty.
TEST_F(SlidingWindowCounterTest, StaleStateIsForgotten) {
  SlidingWindowCounterState state;
  const LimitParams params = Params(5, 1'000'000);
  ASSERT_TRUE(EvaluateSlidingWindowCounter(params, state, kCaseBaseUs, 5).allowed);
  const Decision decision = EvaluateSlidingWindowCounter(params, state, kCaseBaseUs + 2'000'000, 5);
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(state.previous, 0u);
  EXPECT_EQ(state.current, 5u);
}

}  // namespace
}  // namespace sluice
