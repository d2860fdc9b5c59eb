// Properties of the sliding-window-log algorithm that are awkward to state as case data.
#include "server/algorithm/sliding_window_log.h"

#include <algorithm>
#include <random>
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

// Verifies that coarsening keeps the total, drops only expired entries, moves times later by
// less than the grid step and bounds the entry count; and that from the coarse log no request
// is admitted that the exact log would deny, nor told to wait more than one step longer.
TEST_F(SlidingWindowLogTest, CoarseningNeverAdmitsMoreAndWaitsAtMostOneStepLonger) {
  const LimitParams params = Params(8000, 1'000'000);
  const int64_t grid = 10'000;
  SlidingWindowLogState exact;
  // 4000 admissions 100 us apart over 400 ms; 50 ms after the window of the first has ended.
  int64_t now = kCaseBaseUs + 1'000'000;
  for (int i = 0; i < 4000; ++i, now += 100) {
    ASSERT_TRUE(EvaluateSlidingWindowLog(params, exact, now, 1 + i % 2).allowed);
  }
  ASSERT_EQ(exact.total, 6000u);
  now = kCaseBaseUs + 2'050'000;
  SlidingWindowLogState coarse = exact;
  CoarsenSlidingWindowLog(coarse, now, params.period_us, grid);
  // The 501 admissions up to 1.05 s have expired (751 hits); the rest round up to 1.06 ... 1.40.
  EXPECT_EQ(coarse.total, 6000u - 751u);
  EXPECT_EQ(coarse.entries.size(), 35u);
  EXPECT_LE(coarse.entries.size(), static_cast<size_t>(params.period_us / grid + 2));
  for (size_t i = 501; i < exact.entries.size(); ++i) {
    const auto& entry = exact.entries[i];
    auto it = std::lower_bound(coarse.entries.begin(), coarse.entries.end(), entry.first,
                               [](const auto& e, int64_t t) { return e.first < t; });
    ASSERT_NE(it, coarse.entries.end());
    EXPECT_LT(it->first - entry.first, grid);
  }
  for (int64_t later : {0, 1, 50'000, 600'000, 999'999, 1'000'000, 1'399'900, 1'500'000}) {
    for (uint64_t hits : {0u, 1u, 100u, 1200u, 2000u, 5000u, 8000u}) {
      SlidingWindowLogState exact_copy = exact;
      SlidingWindowLogState coarse_copy = coarse;
      const Decision e = EvaluateSlidingWindowLog(params, exact_copy, now + later, hits);
      const Decision c = EvaluateSlidingWindowLog(params, coarse_copy, now + later, hits);
      SCOPED_TRACE(::testing::Message() << "later " << later << " hits " << hits);
      EXPECT_TRUE(e.allowed || !c.allowed);
      EXPECT_GE(c.retry_after_us, e.retry_after_us);
      EXPECT_LT(c.retry_after_us, e.retry_after_us + grid);
      if (c.allowed == e.allowed) {
        EXPECT_LE(c.remaining, e.remaining);
        EXPECT_GE(c.reset_after_us, e.reset_after_us);
        EXPECT_LT(c.reset_after_us, e.reset_after_us + grid);
      }
    }
  }
}

// Verifies, over long random sequences, that a log coarsened whenever it grows past a bound
// still never holds more than the limit in any trailing window, and stays near that bound.
TEST_F(SlidingWindowLogTest, CoarsenedLogNeverExceedsLimitInAnyTrailingWindow) {
  const LimitParams all[] = {Params(300, 1'000'000), Params(1000, 100'000),
                             Params(5000, 60'000'000)};
  uint64_t seed = 211;
  for (const LimitParams& params : all) {
    SCOPED_TRACE(testing::FormatParams(params));
    constexpr size_t kMaxEntries = 64;
    const int64_t grid = params.period_us / (kMaxEntries / 4);
    // About twice the limit in demand, mostly small requests, so that the log fills with
    // entries; now and then an idle stretch.
    std::mt19937_64 random(seed++);
    const int64_t step = params.period_us / static_cast<int64_t>(params.limit);
    std::vector<Request> requests;
    int64_t now = kCaseBaseUs;
    for (int i = 0; i < 20000; ++i) {
      now += random() % 50 == 0 ? params.period_us / 3
                                : static_cast<int64_t>(random() % (2 * step + 1));
      requests.push_back({now, 1 + random() % 4});
    }
    SlidingWindowLogState state;
    std::vector<Admission> admitted;
    int coarsenings = 0;
    for (const Request& request : requests) {
      if (EvaluateSlidingWindowLog(params, state, request.now_us, request.hits).allowed) {
        admitted.push_back({request.now_us, request.hits});
      }
      if (state.entries.size() > kMaxEntries) {
        CoarsenSlidingWindowLog(state, request.now_us, params.period_us, grid);
        ++coarsenings;
        ASSERT_LE(state.entries.size(), kMaxEntries / 4 + 2);
      }
    }
    uint64_t in_window = 0;
    size_t begin = 0;
    for (size_t end = 0; end < admitted.size(); ++end) {
      in_window += admitted[end].hits;
      while (admitted[begin].now_us + params.period_us <= admitted[end].now_us) {
        in_window -= admitted[begin++].hits;
      }
      ASSERT_LE(in_window, params.limit) << "window ending at admission " << end;
    }
    EXPECT_GT(coarsenings, 10);
  }
}

}  // namespace
}  // namespace sluice
