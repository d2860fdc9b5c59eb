// Sliding window counter: two epoch-aligned window counters, the previous one weighted by the
// part of it that still overlaps the trailing period. Constant memory; approximates the
// sliding log, assuming the previous window's hits were spread evenly over it.
//
// Not thread-safe: the caller owns `state` and serializes access to it (see algorithm.h).
//
// Arithmetic (mirrored by lua/sliding_window_counter.lua), with P = period_us, L = limit, all
// fractional steps in double in exactly this order:
//   w = floor(now / P) * P. The state rolls to w: kept if window_start == w; if
//   window_start == w - P then previous = current, current = 0; otherwise both are 0.
//   weighted  = (previous * (P - (now - w))) / P
//   estimate  = weighted + current
//   allowed   iff hits <= L and estimate + hits <= L; then current += hits and the rolled state
//             is written (a denial writes nothing; under Charge::kAlways a denial of hits > 0
//             is written the same way, current going past L).
//   remaining = the largest n >= 0 with (weighted + current) + n <= L (current after the
//               decision), searched from max(0, floor(L - (weighted + current))) by
//               MostThatFits, so it agrees with the admission test whatever the rounding.
//   reset     = w + 2P - now if current > 0, else w + P - now if previous > 0, else 0.
//   retry     = the first microsecond t > now at which the same request is admitted: the
//               analytic solution of weighted(t) + current(t) + hits <= L (within this
//               window, then in the next one, where previous = current and current = 0),
//               corrected by FirstAdmittedTime so that t itself admits and t - 1 does not.
//               When hits > L (never admitted): retry = reset.
//   give back (a refund of `hits`, GiveBackSlidingWindowCounter): the state rolls to w, then
//             current -= min(hits, current), and the rolled state is written. The previous
//             window is not touched: its hits are spent, only their weight fades.
//   L == 0    : never reaches this function: sluice::Evaluate decides it (ZeroLimitDecision).
#pragma once

#include <cstdint>

#include "server/algorithm/algorithm.h"

namespace sluice {

// One sliding-counter decision at now_us for `hits`. REQUIRES: params.period_us > 0.
Decision EvaluateSlidingWindowCounter(const LimitParams& params, SlidingWindowCounterState& state,
                                      int64_t now_us, uint64_t hits);

// Gives back up to `hits` of the current window's count (sluice::Refund's first step).
void GiveBackSlidingWindowCounter(const LimitParams& params, SlidingWindowCounterState& state,
                                  int64_t now_us, uint64_t hits);

}  // namespace sluice
