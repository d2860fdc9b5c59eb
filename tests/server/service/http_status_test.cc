#include "server/service/http_status.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

struct Case {
  absl::StatusCode code;
  int http;
  std::string reason;
};

// Verifies every canonical code maps as grpc-gateway maps it, with the standard reason phrase.
TEST(HttpStatusTest, MapsEveryCanonicalCodeAsGrpcGatewayDoes) {
  const Case cases[] = {
      {absl::StatusCode::kOk, 200, "OK"},
      {absl::StatusCode::kCancelled, 499, "Client Closed Request"},
      {absl::StatusCode::kUnknown, 500, "Internal Server Error"},
      {absl::StatusCode::kInvalidArgument, 400, "Bad Request"},
      {absl::StatusCode::kDeadlineExceeded, 504, "Gateway Timeout"},
      {absl::StatusCode::kNotFound, 404, "Not Found"},
      {absl::StatusCode::kAlreadyExists, 409, "Conflict"},
      {absl::StatusCode::kPermissionDenied, 403, "Forbidden"},
      {absl::StatusCode::kResourceExhausted, 429, "Too Many Requests"},
      {absl::StatusCode::kFailedPrecondition, 400, "Bad Request"},
      {absl::StatusCode::kAborted, 409, "Conflict"},
      {absl::StatusCode::kOutOfRange, 400, "Bad Request"},
      {absl::StatusCode::kUnimplemented, 501, "Not Implemented"},
      {absl::StatusCode::kInternal, 500, "Internal Server Error"},
      {absl::StatusCode::kUnavailable, 503, "Service Unavailable"},
      {absl::StatusCode::kDataLoss, 500, "Internal Server Error"},
      {absl::StatusCode::kUnauthenticated, 401, "Unauthorized"},
  };
  for (const Case& c : cases) {
    HttpStatus status = HttpStatusFromCode(c.code);
    EXPECT_EQ(status.code, c.http) << absl::StatusCodeToString(c.code);
    EXPECT_EQ(status.reason, c.reason) << absl::StatusCodeToString(c.code);
  }
}

// Verifies a code outside the canonical set is a 500, not a crash or a 200.
TEST(HttpStatusTest, UnknownCodeIsInternalServerError) {
  HttpStatus status = HttpStatusFromCode(static_cast<absl::StatusCode>(99));
  EXPECT_EQ(status.code, 500);
  EXPECT_EQ(status.reason, "Internal Server Error");
}

}  // namespace
}  // namespace sluice
