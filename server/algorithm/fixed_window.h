// Fixed window: one counter per epoch-aligned window of params.period_us, as
// envoyproxy/ratelimit counts. Cheap and exact, but a client may get up to 2 * limit through
// around a window boundary.
//
// Not thread-safe: the caller owns `state` and serializes access to it (see algorithm.h).
//
// Arithmetic (mirrored by lua/fixed_window.lua), with P = period_us and L = limit:
//   w = floor(now / P) * P; a state whose window_start_us != w counts 0 (a new window).
//   allowed   iff count + hits <= L; then count += hits (a denial writes nothing, unless the
//             rule charges always: then count += hits whatever the outcome, saturating).
//   remaining = max(0, L - count).
//   reset     = (w + P) - now if count > 0, else 0.
//   retry     = (w + P) - now when denied; reset when hits > L (never admitted).
//   give back (a refund of `hits`, GiveBackFixedWindow): count -= min(hits, count) when the state
//             is of window w; a state of another window holds nothing of w's and is left alone.
//   L == 0    : never reaches this function: sluice::Evaluate decides it (ZeroLimitDecision).
// With params.calendar_months, w and w + P above are the start and end of the window of
// calendar months that holds now (FixedWindowAt); everything else is the same.
#pragma once

#include <cstdint>

#include "server/algorithm/algorithm.h"

namespace sluice {

// One fixed window: [start_us, end_us), and its index, which names it in storage keys.
struct FixedWindowSpan {
  int64_t start_us = 0;
  int64_t end_us = 0;
  // floor(now / P); with calendar months, the months from January 1970 to the window's first,
  // divided by the window's months.
  int64_t index = 0;
};

// The window of `params` that holds now_us: epoch-aligned periods of params.period_us, or with
// params.calendar_months, max(1, period_us / kMonthUs) calendar months (UTC) counted from
// January 1970. REQUIRES: params.period_us > 0.
FixedWindowSpan FixedWindowAt(const LimitParams& params, int64_t now_us);

// One fixed-window decision at now_us for `hits`. REQUIRES: params.period_us > 0.
Decision EvaluateFixedWindow(const LimitParams& params, FixedWindowState& state, int64_t now_us,
                             uint64_t hits);

// Gives back up to `hits` of the window that holds now_us (sluice::Refund's first step).
void GiveBackFixedWindow(const LimitParams& params, FixedWindowState& state, int64_t now_us,
                         uint64_t hits);

}  // namespace sluice
