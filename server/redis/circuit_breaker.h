// A circuit breaker for one Redis node, so that no request waits out a timeout against a node
// that is dead or paused.
//
// Closed: every batch goes. After `failure_threshold` batches in a row fail with a fault of the
// node (the node answered nothing within the budget, or the connection is lost or down), over
// at least `min_failing_us`, it opens: batches fail at once. (A burst of timeouts that all
// expire at one instant, when this process ran again after being descheduled, is not a node
// that is down.) While open, other batches' failures change nothing; failures that are not the
// node's (a batch not sent within its budget, a node answering others but slowly) never count.
//
// The probe is the client's own call (a PING), not a caller's batch: no request is the one to
// wait on a node that may still be down, and the breaker closes as soon as the node is back,
// whether or not requests come. The first probe is due `open_min_us` after opening; each
// failed probe doubles the wait, up to `open_us`. So a node that stalled for a moment (a
// starved CPU, a fork) is back in use within tens of milliseconds, and a dead one costs a PING
// per `open_us`. The open listener hears when a probe is due; the client claims it
// (StartProbe) and reports it (ProbeDone). Any batch that completes with replies (error replies
// included: the node answered), the probe's among them, closes the breaker.
//
// It also measures the node's failure windows: from the first batch that fails after one that
// succeeded (any failure: every one of them was answered by the failure policy) to the next
// batch that succeeds, or to CloseFailureWindow (the node's keys moved to another node). The
// failures inside a window are not counted; the windows' lengths are (failure_windows()).
//
// Thread-safe and lock-free: Allow is one relaxed load while closed; Record of a success one
// more while no window is open.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "server/common/clock.h"
#include "server/common/metric_histogram.h"

namespace sluice {

struct CircuitBreakerOptions {
  int failure_threshold = 5;     // <= 0: never opens
  int64_t open_us = 1000000;     // the longest wait for a probe
  int64_t open_min_us = 50000;   // the first (at most open_us)
  // The least time from a streak's first failure to the one that opens the breaker.
  int64_t min_failing_us = 0;
};

class CircuitBreaker {
 public:
  // Told each time the breaker opens, with the time until its probe is due; runs on the thread
  // whose Record or ProbeDone opened it.
  using OpenListener = absl::AnyInvocable<void(int64_t probe_due_in_us)>;
  // Told each time a failure window closes, with its length and whether the node answered
  // (false: CloseFailureWindow); runs on the thread that closed it.
  using WindowListener = absl::AnyInvocable<void(int64_t window_us, bool answered)>;

  CircuitBreaker(CircuitBreakerOptions options, const Clock& clock);

  // REQUIRES: before any Record or ProbeDone.
  void set_open_listener(OpenListener listener) { listener_ = std::move(listener); }
  // REQUIRES: before any Record or CloseFailureWindow.
  void set_window_listener(WindowListener listener) { window_listener_ = std::move(listener); }

  // Whether a batch may be sent now: true while closed. Counts the refusals.
  bool Allow();
  // A batch's outcome (OK, or the failure it completed with).
  void Record(const absl::Status& status);

  // Microseconds until the probe is due (> 0), 0 if due now, -1 if none is (closed, or the
  // probe is out).
  int64_t ProbeDueInMicros() const;
  // Claims a due probe: true for one caller, who sends it and must call ProbeDone.
  bool StartProbe();
  // Makes the probe due now, if the breaker is open (the node showed signs of life).
  void ExpediteProbe();
  // The probe's outcome. Its batch is Recorded too, like any other; a failure opens the breaker
  // for another period.
  void ProbeDone(const absl::Status& status);

  // Closes the breaker at once, whatever its state: the node's past failures no longer say
  // anything about it (a new master at that address, or one the topology just promoted).
  // Failures from now on open it again as usual; a probe still out is ignored.
  void Reset();
  // Ends the open failure window, if any, without a success: the node's keys are served
  // elsewhere from now on.
  void CloseFailureWindow();
  // Whether a failure window is open, and since when (monotonic; 0 if none).
  int64_t failing_since_us() const { return failing_since_us_.load(std::memory_order_relaxed); }
  MetricHistogram::Snapshot failure_windows() const { return failure_windows_.snapshot(); }

  bool open() const { return open_until_us_.load(std::memory_order_relaxed) != 0; }
  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  const CircuitBreakerOptions& options() const { return options_; }

 private:
  // Counts an opening (open_until_us_ just set) and tells the listener.
  void Opened();
  // Ends the window opened at `since` (if this thread is the one to end it).
  void EndWindow(bool answered);

  const CircuitBreakerOptions options_;
  const Clock& clock_;
  OpenListener listener_;
  WindowListener window_listener_;
  std::atomic<int64_t> failing_since_us_{0};  // 0: no failure window open
  MetricHistogram failure_windows_;
  std::atomic<int> consecutive_failures_{0};
  std::atomic<int64_t> streak_start_us_{0};  // when the current streak's first failure came
  // 0 while closed; otherwise when the probe is due (monotonic).
  std::atomic<int64_t> open_until_us_{0};
  std::atomic<int64_t> open_period_us_{0};  // the current (or last) wait for a probe
  std::atomic<bool> probe_out_{false};
  std::atomic<uint64_t> opens_{0};
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace sluice
