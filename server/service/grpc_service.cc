#include "server/service/grpc_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
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
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto call = std::make_unique<GrpcCall>();
  if (!call->ParseRequest(*request)) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("the request is not a valid ", GrpcCall::Request::descriptor()->full_name(), " (",
                     request->Length(), " bytes that do not parse as one)")));
    return reactor;
  }
  GrpcCall* raw = call.release();
  limiter_.ShouldRateLimit(*raw->request(), raw->response(),
                           [reactor, raw, response](absl::Status status) {
                             std::unique_ptr<GrpcCall> call(raw);
                             if (!status.ok()) {
                               reactor->Finish(ToGrpcStatus(status));
                               return;
                             }
                             reactor->Finish(call->SerializeResponse(response));
                           });
  return reactor;
}

}  // namespace sluice
