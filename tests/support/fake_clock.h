// A Clock that only moves when a test tells it to. Safe for concurrent use: reads and writes are
// atomic, so a test thread may advance it while server threads read it.
#pragma once

#include <atomic>
#include <cstdint>

#include "server/common/clock.h"

namespace sluice {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_micros = 1700000000000000) : now_(now_micros) {}

  int64_t NowMicros() const override { return now_.load(std::memory_order_relaxed); }
  // Moves in lockstep with NowMicros.
  int64_t MonotonicMicros() const override { return NowMicros(); }

  void SetMicros(int64_t now_micros) { now_.store(now_micros, std::memory_order_relaxed); }
  void AdvanceMicros(int64_t delta) { now_.fetch_add(delta, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace sluice
