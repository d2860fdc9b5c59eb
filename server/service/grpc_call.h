// One ShouldRateLimit call's request and response, on an arena whose first block is part of the
// call, so that a typical call allocates its messages with the call itself. The method is
// registered raw (grpc_service.h): the call parses the request from gRPC's buffer itself, so
// that bytes that are not a RateLimitRequest get a clear INVALID_ARGUMENT, and serializes the
// response into gRPC's buffer. bench/micro/grpc_call_bench.cc compares this with gRPC's
// generated (non-raw) path.
#pragma once

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "google/protobuf/arena.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/status.h"

namespace sluice {

class GrpcCall {
 public:
  using Request = envoy::service::ratelimit::v3::RateLimitRequest;
  using Response = envoy::service::ratelimit::v3::RateLimitResponse;

  GrpcCall() : arena_(ArenaOptions(initial_block_, sizeof(initial_block_))) {}
  GrpcCall(const GrpcCall&) = delete;
  GrpcCall& operator=(const GrpcCall&) = delete;

  // Parses the request from `buffer` (read, not consumed); false if the bytes are not one.
  bool ParseRequest(const grpc::ByteBuffer& buffer) {
    // The reader only reads; it takes a non-const pointer for gRPC's C API.
    grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&buffer));
    return request_->ParseFromZeroCopyStream(&reader);
  }
  // Serializes the response into `out`.
  grpc::Status SerializeResponse(grpc::ByteBuffer* out) const {
    bool own_buffer = false;
    return grpc::SerializationTraits<Response>::Serialize(*response_, out, &own_buffer);
  }

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

}  // namespace sluice
