// One ShouldRateLimit call's request and response, on an arena whose first block is part of the
// call, so that a typical call allocates its messages with the call itself. The method is
// registered raw (grpc_service.h): the call parses the request from gRPC's buffer itself, so
// that bytes that are not a RateLimitRequest get a clear INVALID_ARGUMENT, and serializes the
// response into gRPC's buffer. bench/micro/grpc_call_bench.cc compares this with gRPC's
// generated (non-raw) path.
#pragma once

#include <cstdint>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "google/protobuf/arena.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/status.h"
#include "server/trace/tracer.h"

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

  // Where the answer goes, kept with the call so that the decision path's callback captures
  // nothing but the call (and fits in the callback's inline storage).
  grpc::ServerUnaryReactor* reactor = nullptr;
  grpc::ByteBuffer* response_buffer = nullptr;
  int64_t arrived_us = 0;
  // The call's span, when it is traced (inactive otherwise).
  Span span;

 private:
  static google::protobuf::ArenaOptions ArenaOptions(char* block, size_t size) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = size;
    return options;
  }

  // The arena's first block, inside the call: a request of one or two descriptors and its
  // response fit (a descriptor takes ~350 bytes of both), larger ones continue in blocks the arena
  // allocates. Sized so that the whole GrpcCall stays under glibc's large-chunk threshold (1008
  // bytes asked): a larger allocation per call makes malloc consolidate its fast bins every time.
  alignas(16) char initial_block_[904];
  google::protobuf::Arena arena_;
  Request* const request_ = google::protobuf::Arena::CreateMessage<Request>(&arena_);
  Response* const response_ = google::protobuf::Arena::CreateMessage<Response>(&arena_);
};

static_assert(sizeof(GrpcCall) <= 1008, "GrpcCall must stay a small (tcache) allocation");

}  // namespace sluice
