#include "server/algorithm/algorithm.h"

#include <algorithm>
#include <iterator>

#include "server/algorithm/fixed_window.h"
#include "server/algorithm/gcra.h"
#include "server/algorithm/leaky_bucket.h"
#include "server/algorithm/sliding_window_counter.h"
#include "server/algorithm/sliding_window_log.h"
#include "server/algorithm/token_bucket.h"

namespace sluice {

namespace {

constexpr Algorithm kAllAlgorithms[] = {
    Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
    Algorithm::kTokenBucket, Algorithm::kLeakyBucket,      Algorithm::kGcra,
    Algorithm::kConcurrency,
};
static_assert(std::size(kAllAlgorithms) == kAlgorithmCount);

}  // namespace

absl::string_view AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kFixedWindow:
      return "fixed_window";
    case Algorithm::kSlidingWindowLog:
      return "sliding_window_log";
    case Algorithm::kSlidingWindowCounter:
      return "sliding_window_counter";
    case Algorithm::kTokenBucket:
      return "token_bucket";
    case Algorithm::kLeakyBucket:
      return "leaky_bucket";
    case Algorithm::kGcra:
      return "gcra";
    case Algorithm::kConcurrency:
      return "concurrency";
  }
  return "unknown";
}

std::optional<Algorithm> ParseAlgorithm(absl::string_view name) {
  for (Algorithm algorithm : kAllAlgorithms) {
    if (AlgorithmName(algorithm) == name) {
      return algorithm;
    }
  }
  return std::nullopt;
}

absl::string_view ChargeName(Charge charge) {
  return charge == Charge::kAlways ? "always" : "if_admitted";
}

std::optional<Charge> ParseCharge(absl::string_view name) {
  for (Charge charge : {Charge::kIfAdmitted, Charge::kAlways}) {
    if (ChargeName(charge) == name) {
      return charge;
    }
  }
  return std::nullopt;
}

AlgorithmState NewState(Algorithm algorithm) {
  switch (Engine(algorithm)) {
    case Algorithm::kFixedWindow:
      return FixedWindowState{};
    case Algorithm::kSlidingWindowLog:
      return SlidingWindowLogState{};
    case Algorithm::kSlidingWindowCounter:
      return SlidingWindowCounterState{};
    case Algorithm::kTokenBucket:
      return TokenBucketState{};
    case Algorithm::kLeakyBucket:
      return LeakyBucketState{};
    case Algorithm::kGcra:
      return GcraState{};
    case Algorithm::kConcurrency:
      break;  // Engine: the sliding window log
  }
  return FixedWindowState{};
}

int64_t NoLimitWait(const LimitParams& params, int64_t now_us) {
  return params.algorithm == Algorithm::kFixedWindow ? FixedWindowAt(params, now_us).end_us - now_us
                                                     : params.period_us;
}

Decision ZeroLimitDecision(const LimitParams& params, uint64_t hits, int64_t now_us) {
  Decision decision;
  decision.at_us = now_us;
  decision.allowed = hits == 0;
  decision.reset_after_us = NoLimitWait(params, now_us);
  decision.retry_after_us = decision.allowed ? 0 : decision.reset_after_us;
  return decision;
}

Decision NeverAdmittedDecision(const LimitParams& params, int64_t now_us) {
  Decision decision;
  decision.at_us = now_us;
  decision.never = true;
  decision.retry_after_us = NoLimitWait(params, now_us);
  decision.reset_after_us = decision.retry_after_us;
  return decision;
}

Decision Evaluate(const LimitParams& params, AlgorithmState& state, int64_t now_us, uint64_t hits) {
  if (params.limit == 0) {
    return ZeroLimitDecision(params, hits, now_us);
  }
  if (params.charge == Charge::kAlways) {
    hits = std::min(hits, kMaxChargedHits);
  }
  switch (Engine(params.algorithm)) {
    case Algorithm::kFixedWindow:
      return EvaluateFixedWindow(params, std::get<FixedWindowState>(state), now_us, hits);
    case Algorithm::kSlidingWindowLog:
      return EvaluateSlidingWindowLog(params, std::get<SlidingWindowLogState>(state), now_us, hits);
    case Algorithm::kSlidingWindowCounter:
      return EvaluateSlidingWindowCounter(params, std::get<SlidingWindowCounterState>(state),
                                          now_us, hits);
    case Algorithm::kTokenBucket:
      return EvaluateTokenBucket(params, std::get<TokenBucketState>(state), now_us, hits);
    case Algorithm::kLeakyBucket:
      return EvaluateLeakyBucket(params, std::get<LeakyBucketState>(state), now_us, hits);
    case Algorithm::kGcra:
      return EvaluateGcra(params, std::get<GcraState>(state), now_us, hits);
    case Algorithm::kConcurrency:
      break;  // Engine: the sliding window log
  }
  return Decision{};
}

Decision Refund(const LimitParams& params, AlgorithmState& state, int64_t now_us, uint64_t hits) {
  if (params.limit == 0) {
    return ZeroLimitDecision(params, 0, now_us);
  }
  hits = std::min(hits, kMaxChargedHits);
  switch (Engine(params.algorithm)) {
    case Algorithm::kFixedWindow:
      GiveBackFixedWindow(params, std::get<FixedWindowState>(state), now_us, hits);
      break;
    case Algorithm::kSlidingWindowLog:
      GiveBackSlidingWindowLog(params, std::get<SlidingWindowLogState>(state), now_us, hits);
      break;
    case Algorithm::kSlidingWindowCounter:
      GiveBackSlidingWindowCounter(params, std::get<SlidingWindowCounterState>(state), now_us,
                                   hits);
      break;
    case Algorithm::kTokenBucket:
      GiveBackTokenBucket(params, std::get<TokenBucketState>(state), now_us, hits);
      break;
    case Algorithm::kLeakyBucket:
      GiveBackLeakyBucket(params, std::get<LeakyBucketState>(state), now_us, hits);
      break;
    case Algorithm::kGcra:
      GiveBackGcra(params, std::get<GcraState>(state), now_us, hits);
      break;
    case Algorithm::kConcurrency:
      break;  // Engine: the sliding window log
  }
  // A check of 0 hits never charges, so a state still in debt is left as given back.
  Decision decision = Evaluate(params, state, now_us, 0);
  decision.allowed = true;
  decision.retry_after_us = 0;
  decision.delay_us = 0;
  return decision;
}

}  // namespace sluice
