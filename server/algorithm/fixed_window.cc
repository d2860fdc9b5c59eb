#include "server/algorithm/fixed_window.h"

#include <algorithm>
#include <limits>

#include "server/algorithm/algorithm_internal.h"

namespace sluice {

using algorithm_internal::WindowStart;

Decision EvaluateFixedWindow(const LimitParams& params, FixedWindowState& state, int64_t now_us,
                             uint64_t hits) {
  const uint64_t limit = params.limit;
  const int64_t window_start = WindowStart(now_us, params.period_us);
  const int64_t window_end = window_start + params.period_us;
  uint64_t count = state.window_start_us == window_start ? state.count : 0;

  Decision decision;
  // Written so that nothing overflows; count may exceed limit after the limit was lowered.
  decision.allowed = hits <= limit && count <= limit - hits;
  if (decision.allowed || ChargesWhenDenied(params, hits)) {
    count = count > std::numeric_limits<uint64_t>::max() - hits
                ? std::numeric_limits<uint64_t>::max()
                : count + hits;
    state.window_start_us = window_start;
    state.count = count;
  }
  decision.remaining = count < limit ? limit - count : 0;
  decision.reset_after_us = count > 0 ? window_end - now_us : 0;
  if (!decision.allowed) {
    decision.retry_after_us = hits > limit ? decision.reset_after_us : window_end - now_us;
  }
  return decision;
}

void GiveBackFixedWindow(const LimitParams& params, FixedWindowState& state, int64_t now_us,
                         uint64_t hits) {
  if (state.window_start_us == WindowStart(now_us, params.period_us)) {
    state.count -= std::min(hits, state.count);
  }
}

}  // namespace sluice
