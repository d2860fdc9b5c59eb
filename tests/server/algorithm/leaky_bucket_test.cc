// Properties of the leaky-bucket algorithm that are awkward to state as case data.
#include "server/algorithm/leaky_bucket.h"

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

class LeakyBucketTest : public ::testing::Test {
 protected:
  static LimitParams Params(uint64_t limit, int64_t period_us, uint64_t burst) {
    return {.algorithm = Algorithm::kLeakyBucket,
            .limit = limit,
            .period_us = period_us,
            .burst = burst};
  }
};

const LimitParams kRandomParams[] = {
    {Algorithm::kLeakyBucket, 3, 1'000'000, 3},  {Algorithm::kLeakyBucket, 10, 1'000'000, 20},
    {Algorithm::kLeakyBucket, 1, 60'000'000, 5}, {Algorithm::kLeakyBucket, 1000, 1'000'000, 1},
    {Algorithm::kLeakyBucket, 7, 3'000'000, 4},  {Algorithm::kLeakyBucket, 3, 1'000'000, 7}};

// Verifies, over long random sequences, that admissions stay within the bucket bound
// (burst + elapsed * L / P over any interval) and that every decision keeps the promises
// shared by all algorithms.
TEST_F(LeakyBucketTest, RandomSequencesStayWithinBucketBound) {
  uint64_t seed = 401;
  for (const LimitParams& params : kRandomParams) {
    SCOPED_TRACE(testing::FormatParams(params));
    const std::vector<Admission> admitted =
        RunAndCheckCommonProperties(params, RandomRequests(params, seed++, 3000));
    const double rate = static_cast<double>(params.limit) / static_cast<double>(params.period_us);
    for (size_t i = 0; i < admitted.size(); ++i) {
      uint64_t hits = 0;
      for (size_t j = i; j < admitted.size(); ++j) {
        hits += admitted[j].hits;
        const double bound = static_cast<double>(params.burst) +
                             static_cast<double>(admitted[j].now_us - admitted[i].now_us) * rate;
        ASSERT_LE(static_cast<double>(hits), bound * (1 + 1e-12) + 1e-9)
            << "admissions " << i << ".." << j;
      }
    }
    EXPECT_GT(admitted.size(), params.burst) << "the run admitted almost nothing";
  }
}

// Verifies that holding every admitted request for its delay_us shapes the output to the
// drain rate: each release follows the one before by at least the previous request's drain
// time (hits * P / L, less one microsecond of rounding).
TEST_F(LeakyBucketTest, DelayShapesOutputToDrainRate) {
  uint64_t seed = 451;
  for (const LimitParams& params : kRandomParams) {
    SCOPED_TRACE(testing::FormatParams(params));
    const std::vector<Admission> admitted =
        RunAndCheckCommonProperties(params, RandomRequests(params, seed++, 3000));
    for (size_t i = 1; i < admitted.size(); ++i) {
      const int64_t gap = (admitted[i].now_us + admitted[i].delay_us) -
                          (admitted[i - 1].now_us + admitted[i - 1].delay_us);
      const double drain = static_cast<double>(admitted[i - 1].hits) *
                           static_cast<double>(params.period_us) /
                           static_cast<double>(params.limit);
      ASSERT_GE(static_cast<double>(gap), drain - 1.0) << "release " << i;
    }
  }
}

// Verifies that a clock stepping back does not drain the bucket.
TEST_F(LeakyBucketTest, ClockSteppingBackDoesNotDrain) {
  LeakyBucketState state;
  const LimitParams params = Params(1, 1'000'000, 2);
  ASSERT_TRUE(EvaluateLeakyBucket(params, state, kCaseBaseUs + 1'000'000, 2).allowed);
  const Decision back = EvaluateLeakyBucket(params, state, kCaseBaseUs, 1);
  EXPECT_FALSE(back.allowed);
  EXPECT_EQ(back.retry_after_us, 2'000'000);
  EXPECT_EQ(state.level, 2.0);
  EXPECT_EQ(state.last_us, kCaseBaseUs + 1'000'000);
}

}  // namespace
}  // namespace sluice
