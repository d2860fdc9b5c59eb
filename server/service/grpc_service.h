// envoy.service.ratelimit.v3.RateLimitService on gRPC's callback API. Handlers never block:
// each call hands its request to the RateLimiter and returns; the reactor is finished from
// whichever thread completes the decision. Thread-safe.
//
// The method is registered raw: the service parses the request bytes itself, so that a request
// that is not a valid RateLimitRequest gets INVALID_ARGUMENT with a message saying so (gRPC's
// own parsing would answer an empty-messaged error), and so that one call's request and
// response share one protobuf arena whose first block is part of the call.
//
// With a Tracer, each call sampled gets a server span, a child of the caller's when its metadata
// carries a trace context (traceparent/tracestate, or B3), named like OpenTelemetry's gRPC
// instrumentation names it.
#pragma once

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/common/metric_histogram.h"
#include "server/service/rate_limiter.h"
#include "server/trace/tracer.h"

namespace sluice {

class GrpcCall;

class RateLimitGrpcService final
    : public envoy::service::ratelimit::v3::RateLimitService::WithRawCallbackMethod_ShouldRateLimit<
          envoy::service::ratelimit::v3::RateLimitService::Service> {
 public:
  // `limiter`, `latency` (optional: each call's time from arrival to answer is recorded in
  // it) and `tracer` (optional: null traces nothing) must outlive the service.
  explicit RateLimitGrpcService(RateLimiter& limiter, MetricHistogram* latency = nullptr,
                                Tracer* tracer = nullptr)
      : limiter_(limiter), latency_(latency), tracer_(tracer) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;

 private:
  // Records the call's latency, ends its span and answers it.
  void Finish(GrpcCall& call, grpc::Status status);

  RateLimiter& limiter_;
  MetricHistogram* const latency_;
  Tracer* const tracer_;
};

// The gRPC status for an absl::Status (the canonical codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace sluice
