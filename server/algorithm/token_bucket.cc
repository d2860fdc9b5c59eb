#include "server/algorithm/token_bucket.h"

#include <algorithm>

#include "server/algorithm/algorithm_internal.h"

namespace sluice {

namespace {

using algorithm_internal::CeilMicros;
using algorithm_internal::FirstAdmittedTime;
using algorithm_internal::FloorRemaining;

struct Bucket {
  double tokens;
  int64_t last_us;
};

// The tokens `bucket` holds at now_us: min(B, tokens + (elapsed * L) / P).
double Refill(const Bucket& bucket, double burst, double limit, double period, int64_t now_us) {
  const int64_t elapsed = std::max<int64_t>(0, now_us - bucket.last_us);
  return std::min(burst, bucket.tokens + (static_cast<double>(elapsed) * limit) / period);
}

}  // namespace

Decision EvaluateTokenBucket(const LimitParams& params, TokenBucketState& state, int64_t now_us,
                             uint64_t hits) {
  const double burst = static_cast<double>(params.burst);
  const double limit = static_cast<double>(params.limit);
  const double period = static_cast<double>(params.period_us);
  const double cost = static_cast<double>(hits);

  // What is stored after this decision; refill from it answers every "when" below.
  Bucket stored = state.initialized ? Bucket{state.tokens, state.last_us} : Bucket{burst, now_us};
  double tokens = Refill(stored, burst, limit, period, now_us);
  const int64_t last_us = std::max(stored.last_us, now_us);

  Decision decision;
  decision.allowed = hits <= params.burst && tokens >= cost;
  if (decision.allowed || ChargesWhenDenied(params, hits)) {
    tokens -= cost;
    // A charge while denied goes into debt, kept down to one period's refill (never binding on
    // an admission, which leaves tokens >= 0).
    if (!decision.allowed) {
      tokens = std::max(tokens, -limit);
    }
    stored = Bucket{tokens, last_us};
    state.initialized = true;
    state.tokens = tokens;
    state.last_us = last_us;
  }
  decision.remaining = FloorRemaining(tokens);
  if (tokens < burst) {
    const int64_t guess = last_us + CeilMicros(((burst - tokens) * period) / limit);
    const auto full = [&](int64_t t) { return Refill(stored, burst, limit, period, t) >= burst; };
    decision.reset_after_us = FirstAdmittedTime(now_us, guess, full) - now_us;
  }
  if (!decision.allowed) {
    if (hits > params.burst) {
      decision.retry_after_us = decision.reset_after_us;
    } else {
      const int64_t guess = last_us + CeilMicros(((cost - tokens) * period) / limit);
      const auto admits = [&](int64_t t) {
        return Refill(stored, burst, limit, period, t) >= cost;
      };
      decision.retry_after_us = FirstAdmittedTime(now_us, guess, admits) - now_us;
    }
  }
  return decision;
}

void GiveBackTokenBucket(const LimitParams& params, TokenBucketState& state, int64_t now_us,
                         uint64_t hits) {
  if (!state.initialized) {
    return;
  }
  const double burst = static_cast<double>(params.burst);
  const double tokens =
      Refill(Bucket{state.tokens, state.last_us}, burst, static_cast<double>(params.limit),
             static_cast<double>(params.period_us), now_us);
  state.tokens = std::min(burst, tokens + static_cast<double>(hits));
  state.last_us = std::max(state.last_us, now_us);
}

}  // namespace sluice
