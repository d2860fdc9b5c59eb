// The HTTP status an error of the decision path is answered with on the HTTP side (POST /json),
// so that an HTTP client learns what a gRPC client would: the inverse of gRPC's "HTTP to gRPC
// status code mapping", as grpc-gateway applies it (UNAVAILABLE is 503, INVALID_ARGUMENT 400,
// DEADLINE_EXCEEDED 504, ...). Stateless and thread-safe.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

struct HttpStatus {
  int code;
  // The status line's reason phrase, e.g. "Service Unavailable"; static storage.
  absl::string_view reason;
};

// The HTTP status for a canonical (gRPC) code. kOk is 200; a code outside the canonical set
// is 500, as kUnknown.
HttpStatus HttpStatusFromCode(absl::StatusCode code);

}  // namespace sluice
