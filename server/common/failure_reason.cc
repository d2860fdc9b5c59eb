#include "server/common/failure_reason.h"

#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace sluice {
namespace {

constexpr absl::string_view kPayloadUrl = "sluice/failure_reason";

}  // namespace

absl::Status WithFailureReason(absl::Status status, FailureReason reason) {
  status.SetPayload(kPayloadUrl, absl::Cord(std::string(1, static_cast<char>(reason))));
  return status;
}

FailureReason FailureReasonOf(const absl::Status& status) {
  if (absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
      payload.has_value() && payload->size() == 1) {
    const auto value = static_cast<unsigned char>((*payload)[0]);
    if (value < kFailureReasons) {
      return static_cast<FailureReason>(value);
    }
  }
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return FailureReason::kTimeoutInFlight;
    case absl::StatusCode::kUnavailable:
      return FailureReason::kConnection;
    default:
      return FailureReason::kOther;
  }
}

std::string_view FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kTimeoutBeforeSend:
      return "timeout_before_send";
    case FailureReason::kTimeoutInFlight:
      return "timeout_in_flight";
    case FailureReason::kConnection:
      return "connection";
    case FailureReason::kOutOfMemory:
      return "oom";
    case FailureReason::kReadOnly:
      return "readonly";
    case FailureReason::kLoading:
      return "loading";
    case FailureReason::kCircuitOpen:
      return "circuit_open";
    case FailureReason::kClusterDown:
      return "cluster_down";
    case FailureReason::kTimeoutSlow:
      return "timeout_slow";
    case FailureReason::kArgument:
      return "argument";
    case FailureReason::kTls:
      return "tls";
    case FailureReason::kOther:
      break;
  }
  return "other";
}

}  // namespace sluice
