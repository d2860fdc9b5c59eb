#include "server/algorithm/sliding_window_log.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <utility>

#include "server/algorithm/algorithm_internal.h"

namespace sluice {

Decision EvaluateSlidingWindowLog(const LimitParams& params, SlidingWindowLogState& state,
                                  int64_t now_us, uint64_t hits) {
  const uint64_t limit = params.limit;
  const int64_t period = params.period_us;
  auto& entries = state.entries;
  // Entries [0, first) have expired; they are only dropped when the request is admitted.
  size_t first = 0;
  uint64_t expired = 0;
  while (first < entries.size() && entries[first].first + period <= now_us) {
    expired += entries[first].second;
    ++first;
  }
  uint64_t total = state.total - expired;

  Decision decision;
  decision.allowed = hits <= limit && total <= limit - hits;
  if (decision.allowed || ChargesWhenDenied(params, hits)) {
    entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(first));
    first = 0;
    if (hits > 0) {
      if (!entries.empty() && entries.back().first >= now_us) {
        entries.back().second += hits;
      } else {
        entries.emplace_back(now_us, hits);
      }
      total += hits;
    }
    state.total = total;
  }
  const bool any_live = first < entries.size();
  decision.remaining = total < limit ? limit - total : 0;
  decision.reset_after_us = any_live ? entries.back().first + period - now_us : 0;
  if (!decision.allowed) {
    if (hits > limit) {
      decision.retry_after_us = decision.reset_after_us;
    } else {
      // 0 < need <= total, so the walk ends on a live entry.
      const uint64_t need = total + hits - limit;
      uint64_t freed = 0;
      size_t i = first;
      for (; i < entries.size(); ++i) {
        freed += entries[i].second;
        if (freed >= need) {
          break;
        }
      }
      decision.retry_after_us = entries[i].first + period - now_us;
    }
  }
  return decision;
}

void GiveBackSlidingWindowLog(const LimitParams& params, SlidingWindowLogState& state,
                              int64_t now_us, uint64_t hits) {
  auto& entries = state.entries;
  while (hits > 0 && !entries.empty() && entries.back().first + params.period_us > now_us) {
    auto& newest = entries.back();
    const uint64_t taken = std::min(hits, newest.second);
    newest.second -= taken;
    state.total -= taken;
    hits -= taken;
    if (newest.second == 0) {
      entries.pop_back();
    }
  }
}

void CoarsenSlidingWindowLog(SlidingWindowLogState& state, int64_t now_us, int64_t period_us,
                             int64_t grid_us) {
  std::deque<std::pair<int64_t, uint64_t>> coarse;
  uint64_t total = 0;
  for (const auto& [time_us, hits] : state.entries) {
    if (time_us + period_us <= now_us) {
      continue;
    }
    int64_t rounded = algorithm_internal::WindowStart(time_us, grid_us);
    if (rounded < time_us) {
      rounded += grid_us;
    }
    if (!coarse.empty() && coarse.back().first == rounded) {
      coarse.back().second += hits;
    } else {
      coarse.emplace_back(rounded, hits);
    }
    total += hits;
  }
  state.entries.swap(coarse);
  state.total = total;
}

}  // namespace sluice
