// Leaky bucket (as a meter): a bucket of params.burst capacity that drains params.limit per
// params.period_us; a request pours in `hits`. Besides admission it reports delay_us, the time
// the water already queued ahead needs to drain, so a caller that holds each admitted request
// that long emits requests at the drain rate (the "queue" form of the leaky bucket).
//
// Not thread-safe: the caller owns `state` and serializes access to it (see algorithm.h).
//
// Arithmetic (mirrored by lua/leaky_bucket.lua), with P = period_us, L = limit, B = burst, all
// fractional steps in double in exactly this order:
//   drain(t)  = max(0, level - (max(0, t - last) * L) / P)   [state's level and last]
//   level     = drain(now); last = max(last, now).
//   allowed   iff hits <= B and level + hits <= B; then delay = ceil((level * P) / L),
//             level = min(level + hits, B + L) and {level, last} is written (a denial writes
//             nothing; under Charge::kAlways a denial of hits > 0 is written the same way,
//             without a delay: a level above B is a debt).
//   remaining = the largest n >= 0 with level + n <= B (level after the decision), searched
//               from max(0, floor(B - level)) by MostThatFits: near B the subtraction and the
//               addition can round apart, and the admission test has the last word.
//   reset     = 0 if level <= 0; else first admitted time of "drain(t) <= 0" from the
//               estimate last + ceil((level * P) / L), minus now.
//   retry     = first admitted time of "drain(t) + hits <= B" from the estimate
//               last + ceil(((level + hits - B) * P) / L), minus now. When hits > B (never
//               admitted): retry = reset.
//   "First admitted time" is FirstAdmittedTime in algorithm_internal.h: a search around the
//   analytic estimate, so the answer is exact whatever the rounding (and capped at 2^53 us);
//   drain runs on the state as stored after this decision.
//   give back (a refund of `hits`, GiveBackLeakyBucket): level = max(0, drain(now) - hits),
//             last = max(last, now), written. A level above B (a debt) is drained first.
//   L == 0    : never reaches this function: sluice::Evaluate decides it (ZeroLimitDecision).
#pragma once

#include <cstdint>

#include "server/algorithm/algorithm.h"

namespace sluice {

// One leaky-bucket decision at now_us for `hits`. REQUIRES: params.period_us > 0.
Decision EvaluateLeakyBucket(const LimitParams& params, LeakyBucketState& state, int64_t now_us,
                             uint64_t hits);

// Takes up to `hits` of water out (sluice::Refund's first step).
void GiveBackLeakyBucket(const LimitParams& params, LeakyBucketState& state, int64_t now_us,
                         uint64_t hits);

}  // namespace sluice
