// When health checks again whether the backend has answered, at start with --wait_for_backend:
// envoyproxy/ratelimit's retries of its first Redis connection (src/redis/driver_impl.go,
// NewClientImpl) as a pure function of the times it is told and the random numbers it is given.
// Upstream waits, after each failed attempt, jpillora/backoff v1.0.0's Duration() with Min the
// initial interval, Max the max interval, Factor 2 and Jitter: for the n-th wait (n from 0) a
// draw uniform in [min, min * 2^n), held within [min, max] (just max when min >= max); and its
// retryOrDie gives up, before drawing, once REDIS_STARTUP_MAX_ELAPSED_TIME (non-zero) has passed
// since the client began connecting.
//
// Not thread-safe: one thread drives a schedule.
#pragma once

#include <functional>
#include <optional>

#include "absl/time/time.h"
#include "server/settings/settings.h"

namespace sluice {

class BackendWaitSchedule {
 public:
  // `started`: when the backend began connecting. `uniform` returns numbers in [0, 1) (the
  // jitter); it is called once per wait.
  BackendWaitSchedule(const BackendWaitSettings& settings, absl::Time started,
                      std::function<double()> uniform);

  // After a check at `now` found the backend silent: how long to wait before the next check, or
  // nullopt when the max elapsed time (if any) has passed since `started`: give up.
  std::optional<absl::Duration> AfterSilentCheck(absl::Time now);

  // Silent checks so far.
  int silent_checks() const { return silent_checks_; }

 private:
  const BackendWaitSettings settings_;
  const absl::Time started_;
  std::function<double()> uniform_;
  int silent_checks_ = 0;
};

}  // namespace sluice
