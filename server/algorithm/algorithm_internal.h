// Helpers shared by the six algorithm implementations; not part of the algorithm API.
//
// Every rule here is mirrored by the Lua scripts in lua/, so each helper documents its exact
// arithmetic. Pure functions; safe from any thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "server/algorithm/algorithm.h"

namespace sluice::algorithm_internal {

// The longest duration any decision reports, 2^53 us (about 285 years): every duration and
// time then stays exact in a double, which is all Lua has, and no sum of a time and a duration
// can overflow. A limit so slow that it needs longer reports this instead.
inline constexpr int64_t kMaxDurationUs = int64_t{1} << 53;

// ceil(x) as whole microseconds, saturated to [-kMaxDurationUs, kMaxDurationUs].
// Lua: math.min(math.max(math.ceil(x), -2^53), 2^53).
inline int64_t CeilMicros(double x) {
  constexpr double kLimit = static_cast<double>(kMaxDurationUs);
  if (!(x < kLimit)) {
    return kMaxDurationUs;
  }
  if (x <= -kLimit) {
    return -kMaxDurationUs;
  }
  return static_cast<int64_t>(std::ceil(x));
}

// floor(x) clamped at 0 (and at the uint64 range), for `remaining`.
// Lua: math.max(0, math.floor(x)).
inline uint64_t FloorRemaining(double x) {
  constexpr double kLimit = 18446744073709551616.0;  // 2^64
  if (!(x > 0)) {
    return 0;
  }
  if (x >= kLimit) {
    return std::numeric_limits<uint64_t>::max();
  }
  return static_cast<uint64_t>(std::floor(x));
}

// The epoch-aligned start of the window of length `period_us` that holds `now_us`, i.e.
// floor(now_us / period_us) * period_us, also for negative times. Lua computes it with
// math.floor(now / period) * period, which is exact for |now| < 2^53.
// REQUIRES: period_us > 0.
inline int64_t WindowStart(int64_t now_us, int64_t period_us) {
  int64_t quotient = now_us / period_us;
  if (now_us % period_us != 0 && now_us < 0) {
    --quotient;
  }
  return quotient * period_us;
}

// The smallest time t in (after_us, after_us + kMaxDurationUs] at which `admits(t)` holds, or
// after_us + kMaxDurationUs if there is none that early, searched from the analytic estimate
// `guess_us`. Rounding can move the true answer off the estimate (usually by one
// microsecond; by thousands when a tiny refill per microsecond is absorbed into a large
// double), so the search gallops away from the estimate in doubling steps until the answer is
// bracketed, then bisects. Because the result depends only on `admits`, it is the same whatever
// rounding the estimate suffered; an exact estimate costs two evaluations.
// REQUIRES: admits is monotone (once true, true at every later time) and false at after_us
// itself; |after_us| <= 2^62. Lua: the same search, with math.floor for the halving.
template <typename Predicate>
int64_t FirstAdmittedTime(int64_t after_us, int64_t guess_us, const Predicate& admits) {
  const int64_t latest = after_us + kMaxDurationUs;
  // Invariant once bracketed: admits(hi), and lo == after_us or !admits(lo).
  int64_t hi = guess_us <= after_us ? after_us + 1 : guess_us > latest ? latest : guess_us;
  int64_t lo;
  int64_t step = 1;
  if (admits(hi)) {
    lo = hi - step;
    while (lo > after_us && admits(lo)) {
      hi = lo;
      step *= 2;
      lo = hi - step;
    }
    if (lo < after_us) {
      lo = after_us;
    }
  } else {
    do {
      if (hi == latest) {
        return latest;
      }
      lo = hi;
      hi = lo + step > latest ? latest : lo + step;
      step *= 2;
    } while (!admits(hi));
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (admits(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

// The largest n >= 0 for which `fits(n)` holds, searched from the estimate `guess` (a floor of
// the exact quotient, which rounding can leave one off): up while n + 1 fits, then down while n
// does not. This keeps `remaining` consistent with the admission test itself.
// REQUIRES: fits is monotone (true up to some n, false beyond). Lua: the same two loops.
template <typename Fits>
uint64_t MostThatFits(uint64_t guess, const Fits& fits) {
  uint64_t n = guess;
  while (fits(n + 1)) {
    ++n;
  }
  while (n > 0 && !fits(n)) {
    --n;
  }
  return n;
}

}  // namespace sluice::algorithm_internal
