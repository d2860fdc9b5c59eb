#include "server/service/grpc_service.h"

namespace sluice {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) {
    return grpc::Status::OK;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::ServerUnaryReactor* RateLimitGrpcService::ShouldRateLimit(
    grpc::CallbackServerContext* context,
    const envoy::service::ratelimit::v3::RateLimitRequest* request,
    envoy::service::ratelimit::v3::RateLimitResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  limiter_.ShouldRateLimit(*request, response, [reactor](absl::Status status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace sluice
