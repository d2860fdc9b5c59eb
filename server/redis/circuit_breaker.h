// A circuit breaker for one Redis node, so that no request waits out a timeout against a node
// that is dead or paused.
//
// Closed: every batch goes. After `failure_threshold` batches in a row fail with a fault of the
// node (no reply within the budget, or the connection lost or down), it opens: batches fail at
// once for `open_us`. Then it is half-open: one batch goes as the probe, the others still fail
// at once; the probe's success closes the breaker, its failure opens it again. Any batch that
// completes with replies (error replies included: the node answered) counts as a success.
// Failures that are not the node's (a batch not sent within its budget because this process
// was slow) count as neither.
//
// Thread-safe and lock-free: Allow is one relaxed load while closed.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "server/common/clock.h"

namespace sluice {

struct CircuitBreakerOptions {
  int failure_threshold = 5;  // <= 0: never opens
  int64_t open_us = 1000000;
};

class CircuitBreaker {
 public:
  CircuitBreaker(CircuitBreakerOptions options, const Clock& clock);

  // Whether a batch may be sent now. While half-open, true for exactly one caller (the probe);
  // whoever gets true must Record the batch's outcome.
  bool Allow();
  // A batch's outcome (OK, or the failure it completed with).
  void Record(const absl::Status& status);

  bool open() const { return open_until_us_.load(std::memory_order_relaxed) != 0; }
  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  const CircuitBreakerOptions& options() const { return options_; }

 private:
  void Open();

  const CircuitBreakerOptions options_;
  const Clock& clock_;
  std::atomic<int> consecutive_failures_{0};
  // 0 while closed; otherwise when the next probe may go (monotonic).
  std::atomic<int64_t> open_until_us_{0};
  std::atomic<bool> probe_out_{false};
  std::atomic<uint64_t> opens_{0};
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace sluice
