#include "server/redis/write_horizon.h"

#include <utility>

namespace sluice {

WriteHorizon::WriteHorizon(EventLoop& loop, const Clock& clock, int64_t period_us,
                           absl::AnyInvocable<void()> on_watchdog)
    : clock_(clock), period_us_(period_us), watchdog_(loop, std::move(on_watchdog)) {}

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
  watchdog_.Arm(period_us_);
}

void WriteHorizon::Withdraw() {
  horizon_us_ = 0;
  watchdog_.Cancel();
}

}  // namespace sluice
