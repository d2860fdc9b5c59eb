// Properties of the token-bucket algorithm that are awkward to state as case data.
#include "server/algorithm/token_bucket.h"

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

class TokenBucketTest : public ::testing::Test {
 protected:
  static LimitParams Params(uint64_t limit, int64_t period_us, uint64_t burst) {
    return {.algorithm = Algorithm::kTokenBucket,
            .limit = limit,
            .period_us = period_us,
            .burst = burst};
  }
};

// The bucket bound: over any interval [t_i, t_j] no more than burst + (t_j - t_i) * L / P hits
// are admitted.
void ExpectWithinBucketBound(const LimitParams& params, const std::vector<Admission>& admitted) {
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
}

// Verifies, over long random sequences, that admissions stay within the bucket bound and that
// every decision keeps the promises shared by all algorithms.
TEST_F(TokenBucketTest, RandomSequencesStayWithinBucketBound) {
  const LimitParams all[] = {Params(3, 1'000'000, 3),  Params(10, 1'000'000, 20),
                             Params(1, 60'000'000, 5), Params(1000, 1'000'000, 1),
                             Params(7, 3'000'000, 4),  Params(3, 1'000'000, 7)};
  uint64_t seed = 301;
  for (const LimitParams& params : all) {
    SCOPED_TRACE(testing::FormatParams(params));
    const std::vector<Admission> admitted =
        RunAndCheckCommonProperties(params, RandomRequests(params, seed++, 3000));
    ExpectWithinBucketBound(params, admitted);
    EXPECT_GT(admitted.size(), params.burst) << "the run admitted almost nothing";
  }
}

// Verifies that a clock stepping back neither refills nor loses tokens, and that refill
// resumes from the latest time seen.
TEST_F(TokenBucketTest, ClockSteppingBackDoesNotRefill) {
  TokenBucketState state;
  const LimitParams params = Params(1, 1'000'000, 2);
  ASSERT_TRUE(EvaluateTokenBucket(params, state, kCaseBaseUs + 1'000'000, 2).allowed);
  const Decision back = EvaluateTokenBucket(params, state, kCaseBaseUs, 1);
  EXPECT_FALSE(back.allowed);
  EXPECT_EQ(back.retry_after_us, 2'000'000);  // refill restarts at the latest time, +1s
  EXPECT_EQ(state.last_us, kCaseBaseUs + 1'000'000);
  EXPECT_TRUE(EvaluateTokenBucket(params, state, kCaseBaseUs + 2'000'000, 1).allowed);
}

// Verifies that a refill longer than 2^53 us (285 years) reports that cap instead of
// overflowing or searching forever.
TEST_F(TokenBucketTest, AbsurdlySlowRefillSaturatesDurations) {
  constexpr int64_t kCap = int64_t{1} << 53;
  TokenBucketState state;
  const LimitParams params = Params(1, 86'400'000'000, 1'000'000'000);
  const Decision first = EvaluateTokenBucket(params, state, kCaseBaseUs, 1'000'000'000);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.reset_after_us, kCap);
  const Decision second = EvaluateTokenBucket(params, state, kCaseBaseUs + 1, 2);
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(second.retry_after_us, 2 * 86'400'000'000 - 1);
  EXPECT_EQ(second.reset_after_us, kCap);
}

// Verifies that a bucket idle for a very long time is simply full, not overflowing.
TEST_F(TokenBucketTest, LongIdleRefillsToBurstOnly) {
  TokenBucketState state;
  const LimitParams params = Params(1'000'000, 1, 5);
  ASSERT_TRUE(EvaluateTokenBucket(params, state, kCaseBaseUs, 5).allowed);
  const Decision decision = EvaluateTokenBucket(params, state, kCaseBaseUs + 86'400'000'000, 0);
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(decision.remaining, 5u);
  EXPECT_EQ(state.tokens, 5.0);
}

}  // namespace
}  // namespace sluice
