// Stalls of the machine a test runs on, seen from inside it: the intervals during which a CPU
// ran none of this process's threads although one was ready. A hypervisor that takes a virtual
// CPU away (steal), a CPU quota that throttles the container, or a neighbour at a higher
// priority all show; ordinary load does not, because the scheduler runs a thread that has just
// woken within a millisecond or two.
//
// Timing tests on shared machines use it to tell a slow system under test from a host that was
// not running it: a decision whose time overlapped a stall is not judged on time.
//
// HostStallProbe is not thread-safe: one thread starts and stops it. HostStalls is a value.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace sluice::testing {

// The stalls of one interval, each from when a thread was due to run to when it ran, as
// offsets from the start of the watch (the monotonic clock): per CPU, and as the host's (every
// CPU's merged).
class HostStalls {
 public:
  using Intervals = std::vector<std::pair<absl::Duration, absl::Duration>>;

  HostStalls() = default;
  // One list per CPU watched, each in any order, overlapping or not.
  explicit HostStalls(std::vector<Intervals> per_cpu);

  // Of the host's: a stall of one CPU and one of another that overlap count once.
  int count() const { return static_cast<int>(merged_.size()); }
  absl::Duration total() const;
  absl::Duration longest() const;
  const Intervals& intervals() const { return merged_; }

  // How many of the calls sent evenly at `rate` per second a stall may have made late: those
  // sent within `lead` before one or during one, on its CPU. The work of a call is taken to be
  // spread evenly over the CPUs watched, so a stall of one of two CPUs exposes half the calls in
  // its window and a stall of both exposes all.
  uint64_t CallsExposed(double rate, absl::Duration lead) const;

  // "none", or "2 (41 ms, longest 30 ms)".
  std::string Describe() const;

 private:
  std::vector<Intervals> per_cpu_;  // each merged and in order
  Intervals merged_;
};

// Watches for stalls while it lives: one thread pinned to each CPU this process may run on
// sleeps kTick at a time and records every wake-up later than `threshold` as a stall from when
// it was due to when it ran. Its own cost is a wake-up per CPU per tick.
class HostStallProbe {
 public:
  static constexpr absl::Duration kTick = absl::Milliseconds(1);

  // REQUIRES: threshold > 0. Starts watching.
  explicit HostStallProbe(absl::Duration threshold);
  ~HostStallProbe();
  HostStallProbe(const HostStallProbe&) = delete;
  HostStallProbe& operator=(const HostStallProbe&) = delete;

  // Stops watching and returns what was seen. Call once.
  HostStalls Stop();

 private:
  void Watch(int cpu, size_t index);

  const absl::Duration threshold_;
  const absl::Duration start_;  // CLOCK_MONOTONIC
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  // Per CPU; sized before the threads start, element i written only by thread i as it ends,
  // and read by Stop after joining it.
  std::vector<HostStalls::Intervals> seen_;
};

}  // namespace sluice::testing
