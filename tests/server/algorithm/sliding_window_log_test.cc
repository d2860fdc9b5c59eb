// Properties of the sliding-window-log algorithm that are awkward to state as case data.
#include "server/algorithm/sliding_window_log.h"

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
using testing::Request;
using testing::RunAndCheckCommonProperties;

class SlidingWindowLogTest : public ::testing::Test {
 protected:
  static LimitParams Params(uint64_t limit, int64_t period_us) {
    return {.algorithm = Algorithm::kSlidingWindowLog, .limit = limit, .period_us = period_us};
  }
};

// Verifies, over long random sequences, that no trailing window (t - P, t] ever holds more
// admitted hits than the limit, that the log stays within `limit` entries, and that every
// decision keeps the promises shared by all algorithms.
TEST_F(SlidingWindowLogTest, RandomSequencesNeverExceedLimitInAnyTrailingWindow) {
  const LimitParams all[] = {Params(3, 1'000'000), Params(10, 100'000), Params(100, 60'000'000),
                             Params(1, 1'000'000), Params(7, 250'000)};
  uint64_t seed = 101;
  for (const LimitParams& params : all) {
    SCOPED_TRACE(testing::FormatParams(params));
    const std::vector<Request> requests = RandomRequests(params, seed++, 4000);
    const std::vector<Admission> admitted = RunAndCheckCommonProperties(params, requests);
    // Two pointers: [begin, end] are the admissions inside (admitted[end].now - P, now].
    uint64_t in_window = 0;
    size_t begin = 0;
    for (size_t end = 0; end < admitted.size(); ++end) {
      in_window += admitted[end].hits;
      while (admitted[begin].now_us + params.period_us <= admitted[end].now_us) {
        in_window -= admitted[begin++].hits;
      }
      ASSERT_LE(in_window, params.limit) << "window ending at admission " << end;
    }
    EXPECT_GT(admitted.size(), params.limit) << "the run admitted almost nothing";

    SlidingWindowLogState state;
    for (const Request& request : requests) {
      EvaluateSlidingWindowLog(params, state, request.now_us, request.hits);
      ASSERT_LE(state.entries.size(), params.limit);
    }
  }
}

// Verifies that admissions in one microsecond share one log entry.
TEST_F(SlidingWindowLogTest, SameMicrosecondAdmissionsShareOneEntry) {
  SlidingWindowLogState state;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(EvaluateSlidingWindowLog(Params(10, 1'000'000), state, kCaseBaseUs, 2).allowed);
  }
  ASSERT_EQ(state.entries.size(), 1u);
  EXPECT_EQ(state.entries[0].second, 10u);
  EXPECT_EQ(state.total, 10u);
}

// Verifies that a clock stepping back keeps the log sorted and expires nothing early: the
// late-stamped admission is charged to the newest entry's time.
TEST_F(SlidingWindowLogTest, ClockSteppingBackKeepsLogSorted) {
  SlidingWindowLogState state;
  const LimitParams params = Params(3, 1'000'000);
  ASSERT_TRUE(EvaluateSlidingWindowLog(params, state, kCaseBaseUs + 500, 1).allowed);
  const Decision decision = EvaluateSlidingWindowLog(params, state, kCaseBaseUs + 100, 1);
  ASSERT_TRUE(decision.allowed);
  ASSERT_EQ(state.entries.size(), 1u);
  EXPECT_EQ(state.entries[0].first, kCaseBaseUs + 500);
  EXPECT_EQ(decision.reset_after_us, 1'000'400);
}

// Verifies that a denied request drops nothing, even entries that have expired.
TEST_F(SlidingWindowLogTest, DenialLeavesExpiredEntriesInPlace) {
  SlidingWindowLogState state;
  const LimitParams params = Params(2, 1'000'000);
  ASSERT_TRUE(EvaluateSlidingWindowLog(params, state, kCaseBaseUs, 1).allowed);
  ASSERT_TRUE(EvaluateSlidingWindowLog(params, state, kCaseBaseUs + 600'000, 1).allowed);
  const Decision decision = EvaluateSlidingWindowLog(params, state, kCaseBaseUs + 1'000'000, 2);
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.retry_after_us, 600'000);
  EXPECT_EQ(state.entries.size(), 2u);
  EXPECT_EQ(state.total, 2u);
}

}  // namespace
}  // namespace sluice
