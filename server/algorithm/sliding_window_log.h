// Sliding window log: remembers every admission of the trailing period and admits while their
// hits stay within the limit. Exact at every instant; memory grows with the limit (at most one
// entry per admitting microsecond, and never more than `limit` entries while the limit holds).
//
// Not thread-safe: the caller owns `state` and serializes access to it (see algorithm.h).
//
// Arithmetic (mirrored by lua/sliding_window_log.lua), with P = period_us and L = limit:
//   An entry (ts, n) has expired at now iff ts + P <= now; total = hits of the live entries.
//   allowed   iff total + hits <= L; then expired entries are dropped and, if hits > 0,
//             (now, hits) is appended (a denial writes nothing; under Charge::kAlways a denial
//             of hits > 0 is written the same way, total going past L). An admission in the same
//             microsecond as the newest entry, or earlier (a clock that stepped back), is
//             added to the newest entry, so the log stays sorted and an admission never
//             expires sooner than it would have.
//   remaining = max(0, L - total), total after the decision.
//   reset     = newest_ts + P - now, or 0 when no entry is live.
//   retry     = need = total + hits - L; walk the live entries oldest first, summing their
//               hits until the sum >= need; retry = that entry's ts + P - now.
//               When hits > L (never admitted): retry = reset.
//   give back (a refund of `hits`, GiveBackSlidingWindowLog): up to `hits` of the live entries'
//             hits are removed, newest first (an entry that loses all its hits is dropped), so
//             the admissions that would have expired last go first. Expired entries stay until
//             an admission drops them.
//   L == 0    : never reaches this function: sluice::Evaluate decides it (ZeroLimitDecision).
#pragma once

#include <cstdint>

#include "server/algorithm/algorithm.h"

namespace sluice {

// One sliding-log decision at now_us for `hits`. REQUIRES: params.period_us > 0; state.entries
// sorted by time and state.total their sum, as this function leaves them.
Decision EvaluateSlidingWindowLog(const LimitParams& params, SlidingWindowLogState& state,
                                  int64_t now_us, uint64_t hits);

// Removes up to `hits` of the live entries' hits, newest first (sluice::Refund's first step).
void GiveBackSlidingWindowLog(const LimitParams& params, SlidingWindowLogState& state,
                              int64_t now_us, uint64_t hits);

// Shrinks a log at the price of precision, for a store that must bound its memory: drops the
// entries expired at now_us, rounds every other entry's time up to a multiple of grid_us and
// merges the entries that land on one time (into a newly built log, so the old one's blocks are
// released). state.total is unchanged. Hits only ever expire later than they would have, so the
// log never admits more than the exact one would; a request may be denied, and a retry_after or
// reset_after reported, up to grid_us later than exact. Later admissions within the newest
// entry's grid step join it (as any admission not after the newest entry does), so the log stays
// coarse until time passes that entry. Afterwards it holds at most period_us / grid_us + 2
// entries when none was later than now_us + grid_us.
// REQUIRES: period_us > 0, grid_us > 0; state as EvaluateSlidingWindowLog leaves it.
void CoarsenSlidingWindowLog(SlidingWindowLogState& state, int64_t now_us, int64_t period_us,
                             int64_t grid_us);

}  // namespace sluice
