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

}  // namespace
}  // namespace sluice
