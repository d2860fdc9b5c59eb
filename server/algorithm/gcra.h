// GCRA (generic cell rate algorithm): token-bucket admission kept in a single value, the
// theoretical arrival time (TAT) of the next request. Each hit costs one emission interval
// T = P / L; a request is admitted while the TAT it would push out stays within the burst
// tolerance tau = T * B of now, so a fresh key admits B hits at once.
//
// Not thread-safe: the caller owns `state` and serializes access to it (see algorithm.h).
//
// Arithmetic (mirrored by lua/gcra.lua), with P = period_us, L = limit, B = burst, all in
// double in exactly this order:
//   T = P / L; tau = T * B.
//   tat = max(state.tat_us, now); ahead = tat - now   [exact: both are near now]
//   allowed   iff hits <= B and ahead + hits * T <= tau; then
//             state.tat_us = min(tat + hits * T, now + (tau + P)) (a denial writes nothing;
//             under Charge::kAlways a denial of hits > 0 is written the same way: a TAT beyond
//             now + tau is a debt).
//   With ahead' = max(state.tat_us, now) - now after the decision:
//   remaining = the largest n >= 0 with ahead' + n * T <= tau, searched by MostThatFits from
//               max(0, floor((tau - ahead') / T)) (that quotient alone is sometimes one short).
//   reset     = ceil(ahead').
//   retry     = first admitted time (FirstAdmittedTime in algorithm_internal.h) of
//               "max(tat, t) - t + hits * T <= tau" from the estimate
//               now + ceil((ahead' + hits * T) - tau), minus now. When hits > B (never
//               admitted): retry = reset.
//   The admission test works on ahead rather than on (tat + hits * T) - now because an
//   absolute time near 1.7e15 us has a resolution of 0.25 us: rounding tat + hits * T there
//   would deny a fresh key its full burst for about a third of all (P, L, B).
//   The stored TAT itself still rounds to that 0.25 us grid (up or down, by at most 0.125 us).
//   Two visible consequences, which the Lua script must reproduce: right after a burst is used
//   up, ahead may exceed tau by that rounding, so even a hits == 0 check is denied for 1 us
//   (tests/cases/gcra.cases, three_per_second_burst_two_rounding); and the long-run rate can
//   differ from L / P by up to 0.125 us per admission, a relative 0.125 / T, which matters only
//   when T is a few microseconds or less (limits near a million per second).
//   give back (a refund of `hits`, GiveBackGcra): state.tat_us = max(max(tat, now) - hits * T,
//             now): the TAT moves back by the hits' emission intervals, never before now (a
//             full burst is all a key can hold).
//   L == 0    : never reaches this function: sluice::Evaluate decides it (ZeroLimitDecision).
#pragma once

#include <cstdint>

#include "server/algorithm/algorithm.h"

namespace sluice {

// One GCRA decision at now_us for `hits`. REQUIRES: params.period_us > 0.
Decision EvaluateGcra(const LimitParams& params, GcraState& state, int64_t now_us, uint64_t hits);

// Moves the TAT back by up to `hits` emission intervals (sluice::Refund's first step).
void GiveBackGcra(const LimitParams& params, GcraState& state, int64_t now_us, uint64_t hits);

}  // namespace sluice
