// Time source for every piece of logic that needs "now". Logic receives a Clock& through its
// constructor and never reads std::chrono clocks itself, so tests can drive time with FakeClock.
// Implementations are safe for concurrent use from any thread.
#pragma once

#include <cstdint>

namespace sluice {

class Clock {
 public:
  virtual ~Clock() = default;

  // Wall-clock time in microseconds since the Unix epoch. Windows are epoch-aligned, so this is
  // wall time, not a monotonic counter; callers tolerate small steps backwards.
  virtual int64_t NowMicros() const = 0;

  // Monotonic time in microseconds from an arbitrary origin, for deadlines and intervals.
  virtual int64_t MonotonicMicros() const = 0;
};

// The process's real clock.
class RealClock final : public Clock {
 public:
  int64_t NowMicros() const override;
  int64_t MonotonicMicros() const override;

  // A process-wide instance; never destroyed.
  static RealClock& Get();
};

}  // namespace sluice
