#include "server/redis/circuit_breaker.h"

#include <algorithm>
#include <utility>

#include "server/common/failure_reason.h"

namespace sluice {
namespace {

bool IsNodeFault(const absl::Status& status) {
  switch (FailureReasonOf(status)) {
    case FailureReason::kTimeoutInFlight:
    case FailureReason::kConnection:
      return true;
    default:
      return false;
  }
}

}  // namespace

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options, const Clock& clock)
    : options_(options), clock_(clock) {}

bool CircuitBreaker::Allow() {
  if (open_until_us_.load(std::memory_order_relaxed) == 0) {
    return true;
  }
  rejected_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void CircuitBreaker::Record(const absl::Status& status) {
  if (status.ok()) {
    consecutive_failures_.store(0, std::memory_order_relaxed);
    if (open_until_us_.load(std::memory_order_relaxed) != 0) {
      open_until_us_.store(0, std::memory_order_relaxed);
    }
    if (failing_since_us_.load(std::memory_order_relaxed) != 0) {
      EndWindow(/*answered=*/true);
    }
    return;
  }
  if (failing_since_us_.load(std::memory_order_relaxed) == 0) {
    int64_t none = 0;
    // At least 1: 0 means no window.
    failing_since_us_.compare_exchange_strong(
        none, std::max<int64_t>(clock_.MonotonicMicros(), 1), std::memory_order_relaxed);
  }
  if (!IsNodeFault(status) || options_.failure_threshold <= 0 ||
      open_until_us_.load(std::memory_order_relaxed) != 0) {
    return;  // not the node's fault, no breaker, or open already: the probe decides
  }
  const int64_t now = clock_.MonotonicMicros();
  const int failures = consecutive_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (failures == 1) {
    streak_start_us_.store(now, std::memory_order_relaxed);
  }
  if (failures >= options_.failure_threshold &&
      now - streak_start_us_.load(std::memory_order_relaxed) >= options_.min_failing_us) {
    // Only the thread that moves it from closed opens it: concurrent failures open it once.
    int64_t closed = 0;
    const int64_t period = std::min(options_.open_min_us, options_.open_us);
    if (open_until_us_.compare_exchange_strong(closed, now + period, std::memory_order_relaxed)) {
      open_period_us_.store(period, std::memory_order_relaxed);
      Opened();
    }
  }
}

int64_t CircuitBreaker::ProbeDueInMicros() const {
  const int64_t open_until = open_until_us_.load(std::memory_order_relaxed);
  if (open_until == 0 || probe_out_.load(std::memory_order_relaxed)) {
    return -1;
  }
  const int64_t due_in = open_until - clock_.MonotonicMicros();
  return due_in > 0 ? due_in : 0;
}

bool CircuitBreaker::StartProbe() {
  return ProbeDueInMicros() == 0 && !probe_out_.exchange(true, std::memory_order_relaxed);
}

void CircuitBreaker::ExpediteProbe() {
  int64_t open_until = open_until_us_.load(std::memory_order_relaxed);
  const int64_t now = clock_.MonotonicMicros();
  while (open_until > now &&
         !open_until_us_.compare_exchange_weak(open_until, now, std::memory_order_relaxed)) {
  }
}

void CircuitBreaker::ProbeDone(const absl::Status& status) {
  probe_out_.store(false, std::memory_order_relaxed);
  if (!status.ok() && open_until_us_.load(std::memory_order_relaxed) != 0) {
    const int64_t period =
        std::min(options_.open_us, 2 * open_period_us_.load(std::memory_order_relaxed));
    open_period_us_.store(period, std::memory_order_relaxed);
    open_until_us_.store(clock_.MonotonicMicros() + period, std::memory_order_relaxed);
    Opened();
  }
}

void CircuitBreaker::Reset() {
  consecutive_failures_.store(0, std::memory_order_relaxed);
  open_until_us_.store(0, std::memory_order_relaxed);
}

void CircuitBreaker::CloseFailureWindow() {
  if (failing_since_us_.load(std::memory_order_relaxed) != 0) {
    EndWindow(/*answered=*/false);
  }
}

void CircuitBreaker::EndWindow(bool answered) {
  const int64_t since = failing_since_us_.exchange(0, std::memory_order_relaxed);
  if (since == 0) {
    return;  // another thread ended it
  }
  const int64_t length = clock_.MonotonicMicros() - since;
  failure_windows_.Record(length);
  if (window_listener_) {
    window_listener_(length, answered);
  }
}

void CircuitBreaker::Opened() {
  consecutive_failures_.store(0, std::memory_order_relaxed);
  opens_.fetch_add(1, std::memory_order_relaxed);
  if (listener_) {
    listener_(open_period_us_.load(std::memory_order_relaxed));
  }
}

}  // namespace sluice
