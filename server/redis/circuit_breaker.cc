#include "server/redis/circuit_breaker.h"

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
  const int64_t open_until = open_until_us_.load(std::memory_order_relaxed);
  if (open_until == 0) {
    return true;
  }
  if (clock_.MonotonicMicros() >= open_until && !probe_out_.exchange(true)) {
    return true;  // the probe
  }
  rejected_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void CircuitBreaker::Record(const absl::Status& status) {
  if (status.ok()) {
    consecutive_failures_.store(0, std::memory_order_relaxed);
    if (open_until_us_.load(std::memory_order_relaxed) != 0) {
      open_until_us_.store(0, std::memory_order_relaxed);
      probe_out_.store(false, std::memory_order_relaxed);
    }
    return;
  }
  if (!IsNodeFault(status) || options_.failure_threshold <= 0) {
    // Not the node's fault, so no verdict: if this was the probe, let another one go.
    probe_out_.store(false, std::memory_order_relaxed);
    return;
  }
  const int failures = consecutive_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (open_until_us_.load(std::memory_order_relaxed) != 0) {
    // Half-open and the probe (or a batch sent before the breaker opened) failed: stay open.
    if (clock_.MonotonicMicros() >= open_until_us_.load(std::memory_order_relaxed)) {
      Open();
    }
    return;
  }
  if (failures >= options_.failure_threshold) {
    Open();
  }
}

void CircuitBreaker::Open() {
  open_until_us_.store(clock_.MonotonicMicros() + options_.open_us, std::memory_order_relaxed);
  probe_out_.store(false, std::memory_order_relaxed);
  opens_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace sluice
