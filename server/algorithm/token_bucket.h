// Token bucket: a bucket of params.burst tokens, refilled at params.limit tokens per
// params.period_us; a request takes `hits` tokens. Allows bursts up to the capacity and a
// long-run rate of limit per period.
//
// Not thread-safe: the caller owns `state` and serializes access to it (see algorithm.h).
//
// Arithmetic (mirrored by lua/token_bucket.lua), with P = period_us, L = limit, B = burst, all
// fractional steps in double in exactly this order:
//   A fresh state is a full bucket: tokens = B, last = now.
//   refill(t) = min(B, tokens + (max(0, t - last) * L) / P)   [state's tokens and last]
//   tokens    = refill(now); last = max(last, now).
//   allowed   iff hits <= B and tokens >= hits; then tokens = max(tokens - hits, -L) and
//             {tokens, last} is written (a denial writes nothing; under Charge::kAlways a
//             denial of hits > 0 is written the same way: tokens below 0 are a debt).
//   remaining = max(0, floor(tokens)), tokens after the decision.
//   reset     = 0 if tokens >= B; else first admitted time of "refill(t) >= B" from the
//               estimate last + ceil(((B - tokens) * P) / L), minus now.
//   retry     = first admitted time of "refill(t) >= hits" from the estimate
//               last + ceil(((hits - tokens) * P) / L), minus now. When hits > B (never
//               admitted): retry = reset.
//   "First admitted time" is FirstAdmittedTime in algorithm_internal.h: a search around the
//   analytic estimate, so the answer is exact whatever the rounding (and capped at 2^53 us);
//   refill runs on the state as stored after this decision.
//   give back (a refund of `hits`, GiveBackTokenBucket): a fresh state is full and stays so;
//             otherwise tokens = refill(now), then tokens = min(B, tokens + hits), last =
//             max(last, now), written. A bucket in debt is repaid first; none is filled past B.
//   L == 0    : never reaches this function: sluice::Evaluate decides it (ZeroLimitDecision).
#pragma once

#include <cstdint>

#include "server/algorithm/algorithm.h"

namespace sluice {

// One token-bucket decision at now_us for `hits`. REQUIRES: params.period_us > 0.
Decision EvaluateTokenBucket(const LimitParams& params, TokenBucketState& state, int64_t now_us,
                             uint64_t hits);

// Puts back up to `hits` tokens (sluice::Refund's first step).
void GiveBackTokenBucket(const LimitParams& params, TokenBucketState& state, int64_t now_us,
                         uint64_t hits);

}  // namespace sluice
