#include "server/service/http_status.h"

namespace sluice {

HttpStatus HttpStatusFromCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return {200, "OK"};
    // nginx's code for a client that went away before the answer; grpc-gateway uses it too.
    case absl::StatusCode::kCancelled:
      return {499, "Client Closed Request"};
    case absl::StatusCode::kInvalidArgument:
    // Neither is about HTTP preconditions (412) or byte ranges (416): the request itself does
    // not fit the server's state or bounds.
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return {400, "Bad Request"};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "Gateway Timeout"};
    case absl::StatusCode::kNotFound:
      return {404, "Not Found"};
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return {409, "Conflict"};
    case absl::StatusCode::kPermissionDenied:
      return {403, "Forbidden"};
    case absl::StatusCode::kUnauthenticated:
      return {401, "Unauthorized"};
    case absl::StatusCode::kResourceExhausted:
      return {429, "Too Many Requests"};
    case absl::StatusCode::kUnimplemented:
      return {501, "Not Implemented"};
    case absl::StatusCode::kUnavailable:
      return {503, "Service Unavailable"};
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    default:
      return {500, "Internal Server Error"};
  }
}

}  // namespace sluice
