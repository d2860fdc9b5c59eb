// Properties of the GCRA algorithm that are awkward to state as case data.
#include "server/algorithm/gcra.h"

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

class GcraTest : public ::testing::Test {
 protected:
  static LimitParams Params(uint64_t limit, int64_t period_us, uint64_t burst) {
    return {.algorithm = Algorithm::kGcra, .limit = limit, .period_us = period_us, .burst = burst};
  }
};

// Verifies, over long random sequences, that admissions stay within the bucket bound
// (burst + elapsed * L / P over any interval) and that every decision keeps the promises
// shared by all algorithms.
TEST_F(GcraTest, RandomSequencesStayWithinBucketBound) {
  const LimitParams all[] = {Params(3, 1'000'000, 3),  Params(10, 1'000'000, 20),
                             Params(1, 60'000'000, 5), Params(1000, 1'000'000, 1),
                             Params(7, 3'000'000, 4),  Params(3, 1'000'000, 7)};
  uint64_t seed = 501;
  for (const LimitParams& params : all) {
    SCOPED_TRACE(testing::FormatParams(params));
    const std::vector<Admission> admitted =
        RunAndCheckCommonProperties(params, RandomRequests(params, seed++, 3000));
    const double rate = static_cast<double>(params.limit) / static_cast<double>(params.period_us);
    for (size_t i = 0; i < admitted.size(); ++i) {
      uint64_t hits = 0;
      for (size_t j = i; j < admitted.size(); ++j) {
        hits += admitted[j].hits;
        // The stored arrival time has a resolution of 0.25 us at today's epoch times; allow
        // that much drift per admission.
        const double bound = static_cast<double>(params.burst) +
                             (static_cast<double>(admitted[j].now_us - admitted[i].now_us) +
                              0.125 * static_cast<double>(j - i + 1)) *
                                 rate;
        ASSERT_LE(static_cast<double>(hits), bound + 1e-9) << "admissions " << i << ".." << j;
      }
    }
    EXPECT_GT(admitted.size(), params.burst) << "the run admitted almost nothing";
  }
}

// Verifies that a fresh key admits its full burst at once and reports it as remaining, for
// every (P, L, B) of a grid, at a realistic epoch time where absolute doubles have a 0.25 us
// resolution (the arithmetic (tat + hits * T) - now fails this for about a third of them).
TEST_F(GcraTest, FreshKeyAdmitsFullBurstForEveryRate) {
  for (int64_t period : {int64_t{1'000'000}, int64_t{60'000'000}, int64_t{3'600'000'000}}) {
    for (uint64_t limit = 1; limit <= 60; ++limit) {
      for (uint64_t burst : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, limit}) {
        const LimitParams params = Params(limit, period, burst);
        for (int64_t offset : {int64_t{0}, int64_t{1}, int64_t{123'457}}) {
          GcraState probe;
          const Decision check = EvaluateGcra(params, probe, kCaseBaseUs + offset, 0);
          ASSERT_EQ(check.remaining, burst) << testing::FormatParams(params);
          GcraState state;
          ASSERT_TRUE(EvaluateGcra(params, state, kCaseBaseUs + offset, burst).allowed)
              << testing::FormatParams(params) << " at +" << offset;
        }
      }
    }
  }
}

// Verifies that a clock stepping back gains nothing: the arrival time stays where it was.
TEST_F(GcraTest, ClockSteppingBackGainsNothing) {
  GcraState state;
  const LimitParams params = Params(1, 1'000'000, 2);
  ASSERT_TRUE(EvaluateGcra(params, state, kCaseBaseUs + 1'000'000, 2).allowed);
  const Decision back = EvaluateGcra(params, state, kCaseBaseUs, 1);
  EXPECT_FALSE(back.allowed);
  EXPECT_EQ(back.retry_after_us, 2'000'000);
  EXPECT_EQ(back.reset_after_us, 3'000'000);
}

}  // namespace
}  // namespace sluice
