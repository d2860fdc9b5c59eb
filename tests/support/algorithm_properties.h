// A randomized property harness for the rate-limit algorithms: drives one key through a long
// request sequence and checks, at every step, the promises algorithm.h makes for all six
// algorithms. The per-algorithm tests add their own rate bounds on the admissions it returns.
//
// Header-only on purpose: it calls sluice::Evaluate, and sluice::test_support must not depend
// on the algorithm library (the Redis-side runner links it without one). Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/algorithm/algorithm.h"
#include "tests/support/algorithm_cases.h"

namespace sluice::testing {

struct Request {
  int64_t now_us = 0;
  uint64_t hits = 0;
};

// One admitted request of a run.
struct Admission {
  int64_t now_us = 0;
  uint64_t hits = 0;
  int64_t delay_us = 0;
};

// The most hits one request can ever be admitted with: the limit for windows, the burst for
// buckets and GCRA, and 0 when the limit is 0.
inline uint64_t MostAdmittable(const LimitParams& params) {
  if (params.limit == 0) {
    return 0;
  }
  switch (params.algorithm) {
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowLog:
    case Algorithm::kSlidingWindowCounter:
      return params.limit;
    default:
      return params.burst;
  }
}

inline bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// Whether two states are identical, doubles compared bit for bit.
inline bool SameState(const AlgorithmState& a, const AlgorithmState& b) {
  if (a.index() != b.index()) {
    return false;
  }
  if (const auto* x = std::get_if<FixedWindowState>(&a)) {
    const auto& y = std::get<FixedWindowState>(b);
    return x->window_start_us == y.window_start_us && x->count == y.count;
  }
  if (const auto* x = std::get_if<SlidingWindowLogState>(&a)) {
    const auto& y = std::get<SlidingWindowLogState>(b);
    return x->entries == y.entries && x->total == y.total;
  }
  if (const auto* x = std::get_if<SlidingWindowCounterState>(&a)) {
    const auto& y = std::get<SlidingWindowCounterState>(b);
    return x->window_start_us == y.window_start_us && x->current == y.current &&
           x->previous == y.previous;
  }
  if (const auto* x = std::get_if<TokenBucketState>(&a)) {
    const auto& y = std::get<TokenBucketState>(b);
    return x->initialized == y.initialized && SameBits(x->tokens, y.tokens) &&
           x->last_us == y.last_us;
  }
  if (const auto* x = std::get_if<LeakyBucketState>(&a)) {
    const auto& y = std::get<LeakyBucketState>(b);
    return SameBits(x->level, y.level) && x->last_us == y.last_us;
  }
  const auto& x = std::get<GcraState>(a);
  const auto& y = std::get<GcraState>(b);
  return SameBits(x.tat_us, y.tat_us);
}

inline bool SameDecision(const Decision& a, const Decision& b) {
  return a.allowed == b.allowed && a.remaining == b.remaining &&
         a.retry_after_us == b.retry_after_us && a.reset_after_us == b.reset_after_us &&
         a.delay_us == b.delay_us;
}

// Evaluates on a copy of `state`, leaving `state` alone.
inline Decision EvaluateCopy(const LimitParams& params, const AlgorithmState& state, int64_t now_us,
                             uint64_t hits) {
  AlgorithmState copy = state;
  return Evaluate(params, copy, now_us, hits);
}

// A request sequence starting at kCaseBaseUs: gaps are mostly short against the period (and
// often 0, a clock that did not move), sometimes a whole idle period or more; hits are mostly
// 1, sometimes 0, up to the capacity, or more than it.
inline std::vector<Request> RandomRequests(const LimitParams& params, uint64_t seed, int count) {
  std::mt19937_64 random(seed);
  const uint64_t capacity = MostAdmittable(params);
  const int64_t period = params.period_us;
  const int64_t step =
      params.limit > 0 ? std::max<int64_t>(1, period / static_cast<int64_t>(params.limit)) : period;
  std::vector<Request> requests;
  int64_t now = kCaseBaseUs + static_cast<int64_t>(random() % static_cast<uint64_t>(period));
  for (int i = 0; i < count; ++i) {
    const uint64_t dice = random() % 100;
    if (dice < 15) {
      // Same microsecond as the request before.
    } else if (dice < 85) {
      now += static_cast<int64_t>(random() % static_cast<uint64_t>(2 * step + 1));
    } else if (dice < 97) {
      now += static_cast<int64_t>(random() % static_cast<uint64_t>(period + 1));
    } else {
      now += period + static_cast<int64_t>(random() % static_cast<uint64_t>(3 * period));
    }
    uint64_t hits = 1;
    const uint64_t kind = random() % 100;
    if (kind < 8) {
      hits = 0;
    } else if (kind < 25) {
      hits = 1 + random() % std::max<uint64_t>(1, capacity);
    } else if (kind < 28) {
      hits = capacity + 1 + random() % 3;
    }
    requests.push_back({now, hits});
  }
  return requests;
}

// Runs `requests` in order against one fresh key and checks after every decision:
//   - a denial leaves the state bit for bit unchanged, and an admission has retry_after 0;
//   - a request that can never be admitted (hits > capacity) is denied with retry == reset;
//   - otherwise a denial's retry_after is exact: the same request is admitted at
//     now + retry_after and denied at now + retry_after - 1;
//   - `remaining` is exact: that many hits are admitted right now, one more is not;
//   - reset_after is exact: at now + reset_after the key decides like a fresh key (for a check
//     and for a full-capacity request), and one microsecond earlier it is not yet reset;
//   - delay_us is 0 except for admitted leaky-bucket requests.
// Returns the admitted requests. Failures are reported through gtest with the step's index.
inline std::vector<Admission> RunAndCheckCommonProperties(const LimitParams& params,
                                                          const std::vector<Request>& requests) {
  const uint64_t capacity = MostAdmittable(params);
  AlgorithmState state = NewState(params.algorithm);
  std::vector<Admission> admitted;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto [now, hits] = requests[i];
    SCOPED_TRACE(absl::StrCat("step ", i, " at base+", now - kCaseBaseUs, " hits ", hits));
    const AlgorithmState before = state;
    const Decision decision = Evaluate(params, state, now, hits);
    SCOPED_TRACE(FormatDecision(decision));

    if (decision.allowed) {
      admitted.push_back({now, hits, decision.delay_us});
      EXPECT_EQ(decision.retry_after_us, 0);
    } else {
      EXPECT_TRUE(SameState(before, state)) << "a denial changed the state";
      if (hits > capacity) {
        EXPECT_EQ(decision.retry_after_us, decision.reset_after_us);
      } else {
        EXPECT_GT(decision.retry_after_us, 0);
        EXPECT_TRUE(EvaluateCopy(params, state, now + decision.retry_after_us, hits).allowed)
            << "retry_after is early";
        EXPECT_FALSE(EvaluateCopy(params, state, now + decision.retry_after_us - 1, hits).allowed)
            << "retry_after is late";
      }
    }
    if (params.algorithm != Algorithm::kLeakyBucket || !decision.allowed) {
      EXPECT_EQ(decision.delay_us, 0);
    }

    if (params.limit > 0) {
      if (decision.remaining > 0) {
        EXPECT_TRUE(EvaluateCopy(params, state, now, decision.remaining).allowed)
            << "remaining over-reports";
      }
      EXPECT_FALSE(EvaluateCopy(params, state, now, decision.remaining + 1).allowed)
          << "remaining under-reports";

      const int64_t reset_at = now + decision.reset_after_us;
      const AlgorithmState fresh = NewState(params.algorithm);
      for (uint64_t probe : {uint64_t{0}, capacity}) {
        EXPECT_TRUE(SameDecision(EvaluateCopy(params, state, reset_at, probe),
                                 EvaluateCopy(params, fresh, reset_at, probe)))
            << "not reset after reset_after, probing hits " << probe;
      }
      if (decision.reset_after_us > 0) {
        EXPECT_GT(EvaluateCopy(params, state, reset_at - 1, 0).reset_after_us, 0)
            << "reset_after is late";
      }
    }
    if (::testing::Test::HasFailure()) {
      break;  // one broken step is enough to read; the rest would repeat it
    }
  }
  return admitted;
}

}  // namespace sluice::testing
