#include "server/service/grpc_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/clock.h"
#include "server/service/grpc_call.h"

namespace sluice {
namespace {

// As OpenTelemetry's gRPC instrumentation names a server span: the full method name.
constexpr absl::string_view kMethodName =
    "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

std::optional<TraceContext> CallerContext(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  return ExtractTraceContext([&](absl::string_view name) -> std::optional<absl::string_view> {
    auto it = metadata.find(grpc::string_ref(name.data(), name.size()));
    if (it == metadata.end()) {
      return std::nullopt;
    }
    return absl::string_view(it->second.data(), it->second.size());
  });
}

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
  auto call = std::make_unique<GrpcCall>();
  call->reactor = context->DefaultReactor();
  call->response_buffer = response;
  call->arrived_us = latency_ != nullptr ? RealClock::Get().MonotonicMicros() : 0;
  if (tracer_ != nullptr) {
    call->span = tracer_->StartCall(kMethodName, CallerContext(*context));
    call->span.Add("rpc.system", "grpc");
    call->span.Add("rpc.service", "envoy.service.ratelimit.v3.RateLimitService");
    call->span.Add("rpc.method", "ShouldRateLimit");
  }
  if (!call->ParseRequest(*request)) {
    Finish(*call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               absl::StrCat("the request is not a valid ",
                                            GrpcCall::Request::descriptor()->full_name(), " (",
                                            request->Length(), " bytes that do not parse as one)")));
    return call->reactor;
  }
  GrpcCall* raw = call.release();
  grpc::ServerUnaryReactor* reactor = raw->reactor;  // `raw` may be gone when the call returns
  limiter_.ShouldRateLimit(
      *raw->request(), raw->response(),
      [this, raw](absl::Status status) {
        std::unique_ptr<GrpcCall> call(raw);
        Finish(*call, status.ok() ? call->SerializeResponse(call->response_buffer)
                                  : ToGrpcStatus(status));
      },
      &raw->span);
  return reactor;
}

void RateLimitGrpcService::Finish(GrpcCall& call, grpc::Status status) {
  if (latency_ != nullptr) {
    latency_->Record(RealClock::Get().MonotonicMicros() - call.arrived_us);
  }
  if (call.span.active()) {
    call.span.Add("rpc.grpc.status_code", static_cast<int64_t>(status.error_code()));
    if (!status.ok()) {
      call.span.SetError(status.error_message());
    }
    call.span.End();
  }
  call.reactor->Finish(std::move(status));
}

}  // namespace sluice
