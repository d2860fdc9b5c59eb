// The loop thread's promise behind RedisConnection's caller writes: "I will run again for this
// connection by horizon()".
//
// A batch a caller writes to the socket from its own thread gets its deadline timer only when the
// loop next runs for the connection (only the loop thread may arm timers). So a caller may write
// a batch only if its deadline is at or after the horizon: the loop is sure to have run, and
// armed the timer, before the deadline passes. The loop renews the promise each time it finishes
// its work on a ready connection, and keeps it with a watchdog timer, which the owner may end
// (Withdraw) when the connection is quiet, so that an idle connection does not wake the loop.
// The loop runs several times per batch, so a renewal only notes itself while the watchdog is
// armed; when the watchdog fires after a renewal it moves itself to the renewed promise
// instead of waking the owner: one timer operation per period, not one per loop run.
//
// Not thread-safe: the owner guards it with its own mutex, and calls LoopRan and Withdraw on the
// loop thread (they arm and cancel the watchdog).
#pragma once

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "server/common/clock.h"
#include "server/redis/event_loop.h"

namespace sluice {

class WriteHorizon {
 public:
  // `period_us` <= 0: no promise is ever made, so Admits is always false. `on_watchdog` runs on
  // the loop thread when the promised time comes without the loop having run for the owner.
  WriteHorizon(EventLoop& loop, const Clock& clock, int64_t period_us,
               absl::AnyInvocable<void()> on_watchdog);

  // Whether a caller may write, now, a batch due at `deadline_us` (clock time).
  bool Admits(int64_t deadline_us) const {
    return horizon_us_ != 0 && deadline_us >= horizon_us_ && deadline_us > clock_.MonotonicMicros();
  }

  // A caller wrote a batch: the watchdog must not let the promise lapse before the loop has run.
  void NoteCallerWrite() { caller_wrote_ = true; }
  // Whether a caller wrote since the loop last ran.
  bool caller_wrote() const { return caller_wrote_; }

  // The loop has finished its work for the owner and taken over every batch callers wrote. With
  // `connection_ready`, the promise moves to `period_us` from now; without, it is withdrawn.
  void LoopRan(bool connection_ready);
  // No more promises until the next LoopRan: later batches go through the loop.
  void Withdraw();

  int64_t horizon_us() const { return horizon_us_; }  // 0: no promise

 private:
  void OnWatchdog();

  const Clock& clock_;
  const int64_t period_us_;
  absl::AnyInvocable<void()> on_watchdog_;
  LoopTimer watchdog_;
  int64_t horizon_us_ = 0;
  bool caller_wrote_ = false;
  bool watchdog_armed_ = false;
  bool renewed_since_armed_ = false;  // LoopRan moved the promise past the watchdog's expiry
};

}  // namespace sluice
