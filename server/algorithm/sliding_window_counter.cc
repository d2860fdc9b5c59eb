#include "server/algorithm/sliding_window_counter.h"

#include <algorithm>
#include <limits>

#include "server/algorithm/algorithm_internal.h"

namespace sluice {

namespace {

using algorithm_internal::CeilMicros;
using algorithm_internal::FirstAdmittedTime;
using algorithm_internal::FloorRemaining;
using algorithm_internal::MostThatFits;
using algorithm_internal::WindowStart;

// The two counters as seen from the window that starts at window_start.
struct Counters {
  uint64_t current = 0;
  uint64_t previous = 0;
};

Counters RollTo(const SlidingWindowCounterState& state, int64_t window_start, int64_t period) {
  if (state.window_start_us == window_start) {
    return {state.current, state.previous};
  }
  if (state.window_start_us == window_start - period) {
    return {0, state.current};
  }
  return {0, 0};
}

// previous * (P - elapsed) / P, in this order of operations.
double Weighted(uint64_t previous, int64_t period, int64_t elapsed) {
  return (static_cast<double>(previous) * static_cast<double>(period - elapsed)) /
         static_cast<double>(period);
}

// Whether `hits` would be admitted at now_us given `state` (which is not modified).
bool AdmitsAt(const SlidingWindowCounterState& state, int64_t period, uint64_t limit,
              int64_t now_us, uint64_t hits) {
  const int64_t window_start = WindowStart(now_us, period);
  const Counters counters = RollTo(state, window_start, period);
  const double estimate = Weighted(counters.previous, period, now_us - window_start) +
                          static_cast<double>(counters.current);
  return hits <= limit && estimate + static_cast<double>(hits) <= static_cast<double>(limit);
}

// The analytic first time at which `hits` is admitted, given the rolled counters of the window
// starting at window_start. Only an estimate: FirstAdmittedTime corrects its rounding.
// REQUIRES: hits <= limit.
int64_t EstimateRetryTime(const Counters& counters, int64_t window_start, int64_t period,
                          uint64_t limit, uint64_t hits) {
  const double p = static_cast<double>(period);
  // Inside this window: previous * (P - e) / P + current + hits <= L holds from
  // e = P - (L - current - hits) * P / previous on.
  const double room_now = static_cast<double>(limit) -
                          (static_cast<double>(counters.current) + static_cast<double>(hits));
  if (counters.previous > 0 && room_now >= 0) {
    const int64_t elapsed = CeilMicros(p - (room_now * p) / static_cast<double>(counters.previous));
    if (elapsed < period) {
      return window_start + elapsed;
    }
  }
  // In the next window: current * (P - e) / P + hits <= L.
  const double room_next = static_cast<double>(limit) - static_cast<double>(hits);
  const int64_t next_start = window_start + period;
  if (static_cast<double>(counters.current) <= room_next) {
    return next_start;
  }
  return next_start + CeilMicros(p - (room_next * p) / static_cast<double>(counters.current));
}

}  // namespace

Decision EvaluateSlidingWindowCounter(const LimitParams& params, SlidingWindowCounterState& state,
                                      int64_t now_us, uint64_t hits) {
  const uint64_t limit = params.limit;
  const int64_t period = params.period_us;
  const int64_t window_start = WindowStart(now_us, period);
  Counters counters = RollTo(state, window_start, period);
  const double weighted = Weighted(counters.previous, period, now_us - window_start);
  const double estimate = weighted + static_cast<double>(counters.current);

  Decision decision;
  decision.allowed =
      hits <= limit && estimate + static_cast<double>(hits) <= static_cast<double>(limit);
  if (decision.allowed || ChargesWhenDenied(params, hits)) {
    counters.current = counters.current > std::numeric_limits<uint64_t>::max() - hits
                           ? std::numeric_limits<uint64_t>::max()
                           : counters.current + hits;
    state.window_start_us = window_start;
    state.current = counters.current;
    state.previous = counters.previous;
  }
  const double estimate_after = weighted + static_cast<double>(counters.current);
  decision.remaining =
      MostThatFits(FloorRemaining(static_cast<double>(limit) - estimate_after), [&](uint64_t n) {
        return estimate_after + static_cast<double>(n) <= static_cast<double>(limit);
      });
  if (counters.current > 0) {
    decision.reset_after_us = window_start + 2 * period - now_us;
  } else if (counters.previous > 0) {
    decision.reset_after_us = window_start + period - now_us;
  }
  if (!decision.allowed) {
    if (hits > limit) {
      decision.retry_after_us = decision.reset_after_us;
    } else {
      const int64_t guess = EstimateRetryTime(counters, window_start, period, limit, hits);
      const auto admits = [&](int64_t t) { return AdmitsAt(state, period, limit, t, hits); };
      decision.retry_after_us = FirstAdmittedTime(now_us, guess, admits) - now_us;
    }
  }
  return decision;
}

void GiveBackSlidingWindowCounter(const LimitParams& params, SlidingWindowCounterState& state,
                                  int64_t now_us, uint64_t hits) {
  const int64_t window_start = WindowStart(now_us, params.period_us);
  const Counters counters = RollTo(state, window_start, params.period_us);
  state.window_start_us = window_start;
  state.current = counters.current - std::min(hits, counters.current);
  state.previous = counters.previous;
}

}  // namespace sluice
