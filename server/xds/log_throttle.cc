#include "server/xds/log_throttle.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace sluice {

LogThrottle::LogThrottle(const Clock& clock, Options options)
    : clock_(clock),
      burst_(std::max(1, options.burst)),
      refill_us_(std::max<int64_t>(1, absl::ToInt64Microseconds(options.refill))),
      repeat_us_(std::max<int64_t>(1, absl::ToInt64Microseconds(options.repeat))),
      budget_(burst_),
      refilled_at_us_(clock.MonotonicMicros()) {}

void LogThrottle::Refill(int64_t now_us) {
  if (budget_ >= burst_) {
    refilled_at_us_ = now_us;  // a full budget does not save up
    return;
  }
  const int64_t lines = (now_us - refilled_at_us_) / refill_us_;
  if (lines <= 0) {
    return;
  }
  budget_ = std::min(burst_, budget_ + lines);
  refilled_at_us_ = budget_ >= burst_ ? now_us : refilled_at_us_ + lines * refill_us_;
}

bool LogThrottle::Admit(absl::string_view kind, uint64_t* skipped) {
  const int64_t now_us = clock_.MonotonicMicros();
  Refill(now_us);
  const size_t hash = absl::Hash<absl::string_view>{}(kind);
  const bool repeated = logged_any_ && hash == last_kind_;
  if ((repeated && now_us - last_logged_us_ < repeat_us_) || budget_ <= 0) {
    ++skipped_;
    return false;
  }
  --budget_;
  logged_any_ = true;
  last_kind_ = hash;
  last_logged_us_ = now_us;
  *skipped = TakeSkipped();
  return true;
}

uint64_t LogThrottle::TakeSkipped() {
  const uint64_t skipped = skipped_;
  skipped_ = 0;
  return skipped;
}

std::string SkippedNote(uint64_t skipped) {
  return skipped == 0 ? std::string() : absl::StrCat("(", skipped, " similar not logged) ");
}

}  // namespace sluice
