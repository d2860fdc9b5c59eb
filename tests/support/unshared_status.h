// A copy of a status that shares no representation with it, for handing a status from a
// client's I/O thread to the test's thread. Debian's abseil is not TSan-instrumented: when two
// threads hold one Status rep (a status with a message or payload), the reference count is
// touched unseen, and TSan reports the final free as a race with the other thread's reads.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/common/failure_reason.h"

namespace sluice::testing {

// Code, message and failure reason of `status`, in a rep of its own.
inline absl::Status UnsharedCopy(const absl::Status& status) {
  if (status.ok()) {
    return absl::OkStatus();
  }
  return WithFailureReason(absl::Status(status.code(), std::string(status.message())),
                           FailureReasonOf(status));
}

}  // namespace sluice::testing
