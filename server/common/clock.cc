#include "server/common/clock.h"

#include <time.h>

namespace sluice {
namespace {

int64_t ReadMicros(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace

int64_t RealClock::NowMicros() const { return ReadMicros(CLOCK_REALTIME); }

int64_t RealClock::MonotonicMicros() const { return ReadMicros(CLOCK_MONOTONIC); }

RealClock& RealClock::Get() {
  static RealClock* clock = new RealClock();
  return *clock;
}

}  // namespace sluice
