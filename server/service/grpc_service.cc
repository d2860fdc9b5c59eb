#include "server/service/grpc_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/clock.h"
#include "server/service/grpc_call.h"

namespace sluice {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) {
    return grpc::Status::OK;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::ServerUnaryReactor* RateLimitGrpcService::ShouldRateLimit(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const Clock* clock = &RealClock::Get();
  const int64_t arrived_us = latency_ != nullptr ? clock->MonotonicMicros() : 0;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const auto finish = [reactor, latency = latency_, arrived_us, clock](grpc::Status status) {
    if (latency != nullptr) {
      latency->Record(clock->MonotonicMicros() - arrived_us);
    }
    reactor->Finish(std::move(status));
  };
  auto call = std::make_unique<GrpcCall>();
  if (!call->ParseRequest(*request)) {
    finish(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("the request is not a valid ", GrpcCall::Request::descriptor()->full_name(), " (",
                     request->Length(), " bytes that do not parse as one)")));
    return reactor;
  }
  GrpcCall* raw = call.release();
  limiter_.ShouldRateLimit(*raw->request(), raw->response(),
                           [finish, raw, response](absl::Status status) {
                             std::unique_ptr<GrpcCall> call(raw);
                             if (!status.ok()) {
                               finish(ToGrpcStatus(status));
                               return;
                             }
                             finish(call->SerializeResponse(response));
                           });
  return reactor;
}

}  // namespace sluice
