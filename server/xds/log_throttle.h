// Decides which events that a remote peer can repeat at will (a management server's rejected
// snapshots, its stream errors, its snapshots accepted) reach the log, so that the peer cannot
// grow the log faster than a few lines a minute however fast it sends, while an operator still
// sees the first of each new thing it does:
//
//   - an event of a kind not seen just before is logged while a small budget lasts (`burst`
//     lines); the budget refills by one line every `refill`;
//   - the kind last logged, seen again, is logged at most once every `repeat` (a server that
//     resends one bad snapshot on every reconnection writes one line a minute, not one a retry);
//   - what is not logged is counted, and the next line logged says how many were skipped.
//
// A kind is any text that tells events apart (a version and an error message); only its hash
// is kept. SLUICE_LOG_EVERY_SECONDS (logging.h) is the simpler tool when every event is alike;
// this one keeps a new event visible after a burst of old ones.
//
// Not thread-safe: one thread owns it (the xDS client's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/common/clock.h"

namespace sluice {

class LogThrottle {
 public:
  struct Options {
    int burst = 5;
    absl::Duration refill = absl::Seconds(5);
    absl::Duration repeat = absl::Minutes(1);
  };

  // `clock` must outlive the throttle. REQUIRES: burst >= 1, refill and repeat positive.
  LogThrottle(const Clock& clock, Options options);

  // Whether the event `kind` is to be logged now. When true, *skipped receives how many events
  // were not logged since the last one that was (0 when none).
  bool Admit(absl::string_view kind, uint64_t* skipped);

  // How many events were not logged since the last one that was; 0 after this call. For a line
  // of another kind that reports them ("... 12 rejected snapshots not logged").
  uint64_t TakeSkipped();

 private:
  void Refill(int64_t now_us);

  const Clock& clock_;
  const int64_t burst_;
  const int64_t refill_us_;
  const int64_t repeat_us_;
  int64_t budget_;
  int64_t refilled_at_us_;
  bool logged_any_ = false;
  size_t last_kind_ = 0;
  int64_t last_logged_us_ = 0;
  uint64_t skipped_ = 0;
};

// "(N similar not logged) " before a line's text, or "" when N is 0.
std::string SkippedNote(uint64_t skipped);

}  // namespace sluice
