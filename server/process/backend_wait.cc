#include "server/process/backend_wait.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sluice {

BackendWaitSchedule::BackendWaitSchedule(const BackendWaitSettings& settings, absl::Time started,
                                         std::function<double()> uniform)
    : settings_(settings), started_(started), uniform_(std::move(uniform)) {}

std::optional<absl::Duration> BackendWaitSchedule::AfterSilentCheck(absl::Time now) {
  const int attempt = silent_checks_++;
  if (settings_.max_elapsed > absl::ZeroDuration() && now - started_ >= settings_.max_elapsed) {
    return std::nullopt;
  }
  const absl::Duration min = settings_.initial_interval;
  const absl::Duration max = settings_.max_interval;
  if (min >= max) {
    return max;
  }
  // min * 2^attempt in seconds; a double holds it (and its overflow to infinity) without harm,
  // and past 2^64 every draw above max is held to max anyway.
  const double min_s = absl::ToDoubleSeconds(min);
  const double top_s = min_s * std::ldexp(1.0, std::min(attempt, 64));
  const double drawn_s = uniform_() * (top_s - min_s) + min_s;
  if (!(drawn_s < absl::ToDoubleSeconds(max))) {
    return max;
  }
  return std::max(min, absl::Seconds(drawn_s));
}

}  // namespace sluice
