#include "server/service/grpc_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace sluice {
namespace {

using Request = envoy::service::ratelimit::v3::RateLimitRequest;
using Response = envoy::service::ratelimit::v3::RateLimitResponse;

// One call's request and response on an arena whose first block is part of the call, so that
// a typical call allocates its messages with the call itself.
class GrpcCall {
 public:
  GrpcCall() : arena_(ArenaOptions(initial_block_, sizeof(initial_block_))) {}
  GrpcCall(const GrpcCall&) = delete;
  GrpcCall& operator=(const GrpcCall&) = delete;

  Request* request() { return request_; }
  Response* response() { return response_; }

 private:
  static google::protobuf::ArenaOptions ArenaOptions(char* block, size_t size) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = size;
    return options;
  }

  alignas(16) char initial_block_[2048];
  google::protobuf::Arena arena_;
  Request* const request_ = google::protobuf::Arena::CreateMessage<Request>(&arena_);
  Response* const response_ = google::protobuf::Arena::CreateMessage<Response>(&arena_);
};

}  // namespace

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
  // The reader only reads the buffer; it takes a non-const pointer for gRPC's C API.
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(request));
  if (!call->request()->ParseFromZeroCopyStream(&reader)) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("the request is not a valid ", Request::descriptor()->full_name(), " (",
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
                             bool own_buffer = false;
                             reactor->Finish(grpc::SerializationTraits<Response>::Serialize(
                                 *call->response(), response, &own_buffer));
                           });
  return reactor;
}

}  // namespace sluice
