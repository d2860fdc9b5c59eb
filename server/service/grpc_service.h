// envoy.service.ratelimit.v3.RateLimitService on gRPC's callback API. Handlers never block:
// each call hands its request to the RateLimiter and returns; the reactor is finished from
// whichever thread completes the decision. Thread-safe.
#pragma once

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/service/rate_limiter.h"

namespace sluice {

class RateLimitGrpcService final
    : public envoy::service::ratelimit::v3::RateLimitService::CallbackService {
 public:
  // `limiter` must outlive the service.
  explicit RateLimitGrpcService(RateLimiter& limiter) : limiter_(limiter) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(
      grpc::CallbackServerContext* context,
      const envoy::service::ratelimit::v3::RateLimitRequest* request,
      envoy::service::ratelimit::v3::RateLimitResponse* response) override;

 private:
  RateLimiter& limiter_;
};

// The gRPC status for an absl::Status (the canonical codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace sluice
