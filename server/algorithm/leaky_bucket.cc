#include "server/algorithm/leaky_bucket.h"

#include <algorithm>

#include "server/algorithm/algorithm_internal.h"

namespace sluice {

namespace {

using algorithm_internal::CeilMicros;
using algorithm_internal::FirstAdmittedTime;
using algorithm_internal::FloorRemaining;
using algorithm_internal::MostThatFits;

struct Bucket {
  double level;
  int64_t last_us;
};

// The water `bucket` holds at now_us: max(0, level - (elapsed * L) / P).
double Drain(const Bucket& bucket, double limit, double period, int64_t now_us) {
  const int64_t elapsed = std::max<int64_t>(0, now_us - bucket.last_us);
  return std::max(0.0, bucket.level - (static_cast<double>(elapsed) * limit) / period);
}

}  // namespace

Decision EvaluateLeakyBucket(const LimitParams& params, LeakyBucketState& state, int64_t now_us,
                             uint64_t hits) {
  const double burst = static_cast<double>(params.burst);
  const double limit = static_cast<double>(params.limit);
  const double period = static_cast<double>(params.period_us);
  const double cost = static_cast<double>(hits);

  // What is stored after this decision; drain from it answers every "when" below.
  Bucket stored{state.level, state.last_us};
  double level = Drain(stored, limit, period, now_us);
  const int64_t last_us = std::max(stored.last_us, now_us);

  Decision decision;
  decision.allowed = hits <= params.burst && level + cost <= burst;
  if (decision.allowed || ChargesWhenDenied(params, hits)) {
    if (decision.allowed) {
      decision.delay_us = CeilMicros((level * period) / limit);
    }
    level += cost;
    // A charge while denied rises past the capacity, kept up to one period's drain beyond it
    // (never binding on an admission, which leaves level <= burst).
    if (!decision.allowed) {
      level = std::min(level, burst + limit);
    }
    stored = Bucket{level, last_us};
    state.level = level;
    state.last_us = last_us;
  }
  decision.remaining = MostThatFits(FloorRemaining(burst - level), [&](uint64_t n) {
    return level + static_cast<double>(n) <= burst;
  });
  if (level > 0) {
    const int64_t guess = last_us + CeilMicros((level * period) / limit);
    const auto empty = [&](int64_t t) { return Drain(stored, limit, period, t) <= 0; };
    decision.reset_after_us = FirstAdmittedTime(now_us, guess, empty) - now_us;
  }
  if (!decision.allowed) {
    if (hits > params.burst) {
      decision.retry_after_us = decision.reset_after_us;
    } else {
      const int64_t guess = last_us + CeilMicros((((level + cost) - burst) * period) / limit);
      const auto admits = [&](int64_t t) {
        return Drain(stored, limit, period, t) + cost <= burst;
      };
      decision.retry_after_us = FirstAdmittedTime(now_us, guess, admits) - now_us;
    }
  }
  return decision;
}

void GiveBackLeakyBucket(const LimitParams& params, LeakyBucketState& state, int64_t now_us,
                         uint64_t hits) {
  const double level = Drain(Bucket{state.level, state.last_us}, static_cast<double>(params.limit),
                             static_cast<double>(params.period_us), now_us);
  state.level = std::max(0.0, level - static_cast<double>(hits));
  state.last_us = std::max(state.last_us, now_us);
}

}  // namespace sluice
