// What registering ShouldRateLimit raw costs: one call's request parsed from gRPC's buffer and
// its response serialized back, as Sluice does it (GrpcCall: both messages on an arena whose
// first block is part of the call) and as gRPC's generated method would (SerializationTraits on
// heap messages), for requests of one and of five descriptors.
//
//   build/bin/sluice-microbench --benchmark_filter=GrpcCall
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/service/grpc_call.h"

namespace sluice {
namespace {

using Request = GrpcCall::Request;
using Response = GrpcCall::Response;

// A request as Envoy sends it: a domain, `descriptors` descriptors of two entries each.
grpc::ByteBuffer RequestBuffer(int descriptors) {
  Request request;
  request.set_domain("edge_proxy_per_ip");
  for (int i = 0; i < descriptors; ++i) {
    auto* descriptor = request.add_descriptors();
    auto* first = descriptor->add_entries();
    first->set_key("remote_address");
    first->set_value(absl::StrCat("10.0.", i, ".17"));
    auto* second = descriptor->add_entries();
    second->set_key("path");
    second->set_value("/api/v1/orders");
  }
  request.set_hits_addend(1);
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<Request>::Serialize(request, &buffer, &own);
  return buffer;
}

// What the limiter writes: an overall code and one status per descriptor.
void FillResponse(const Request& request, Response* response) {
  response->set_overall_code(Response::OK);
  for (int i = 0; i < request.descriptors_size(); ++i) {
    auto* status = response->add_statuses();
    status->set_code(Response::OK);
    status->mutable_current_limit()->set_requests_per_unit(100);
    status->mutable_current_limit()->set_unit(
        envoy::service::ratelimit::v3::RateLimitResponse::RateLimit::SECOND);
    status->set_limit_remaining(42);
    status->mutable_duration_until_reset()->set_nanos(250000000);
  }
}

void BM_GrpcCallRawOnArena(benchmark::State& state) {
  const grpc::ByteBuffer request = RequestBuffer(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto call = std::make_unique<GrpcCall>();
    if (!call->ParseRequest(request)) state.SkipWithError("parse failed");
    FillResponse(*call->request(), call->response());
    grpc::ByteBuffer response;
    benchmark::DoNotOptimize(call->SerializeResponse(&response));
  }
}
BENCHMARK(BM_GrpcCallRawOnArena)->Arg(1)->Arg(5);

void BM_GrpcCallGeneratedOnHeap(benchmark::State& state) {
  const grpc::ByteBuffer request = RequestBuffer(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    // The generated method deserializes from (and then clears) its own copy of the buffer.
    grpc::ByteBuffer copy(request);
    auto message = std::make_unique<Request>();
    auto reply = std::make_unique<Response>();
    if (!grpc::SerializationTraits<Request>::Deserialize(&copy, message.get()).ok()) {
      state.SkipWithError("parse failed");
    }
    FillResponse(*message, reply.get());
    grpc::ByteBuffer response;
    bool own = false;
    benchmark::DoNotOptimize(grpc::SerializationTraits<Response>::Serialize(*reply, &response, &own));
  }
}
BENCHMARK(BM_GrpcCallGeneratedOnHeap)->Arg(1)->Arg(5);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
