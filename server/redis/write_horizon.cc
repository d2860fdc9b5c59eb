#include "server/redis/write_horizon.h"

#include <algorithm>
#include <utility>

namespace sluice {

WriteHorizon::WriteHorizon(EventLoop& loop, const Clock& clock, int64_t period_us,
                           absl::AnyInvocable<void()> on_watchdog)
    : clock_(clock),
      period_us_(period_us),
      on_watchdog_(std::move(on_watchdog)),
      watchdog_(loop, [this] { OnWatchdog(); }) {}

void WriteHorizon::LoopRan(bool connection_ready) {
  caller_wrote_ = false;
  if (period_us_ <= 0) {
    return;
  }
  if (!connection_ready) {
    Withdraw();
    return;
  }
  horizon_us_ = clock_.MonotonicMicros() + period_us_;
  if (watchdog_armed_) {
    renewed_since_armed_ = true;  // the watchdog, due earlier, moves itself when it fires
    return;
  }
  watchdog_armed_ = true;
  watchdog_.Arm(period_us_);
}

void WriteHorizon::OnWatchdog() {
  // On the loop thread, before the owner's hook takes the owner's mutex: this touches only what
  // the loop thread alone writes (the flags, and reads horizon_us_).
  watchdog_armed_ = false;
  if (renewed_since_armed_) {
    // The loop ran since the watchdog was armed: the promise is the renewed one.
    renewed_since_armed_ = false;
    watchdog_armed_ = true;
    watchdog_.Arm(std::clamp<int64_t>(horizon_us_ - clock_.MonotonicMicros(), 0, period_us_));
    return;
  }
  on_watchdog_();
}

void WriteHorizon::Withdraw() {
  horizon_us_ = 0;
  watchdog_armed_ = false;
  renewed_since_armed_ = false;
  watchdog_.Cancel();
}

}  // namespace sluice
