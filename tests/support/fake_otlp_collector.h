// An OpenTelemetry collector for tests of the OTLP exporters: in-process, on loopback, serving
// both protocols at once: OTLP/gRPC (TraceService/Export) and OTLP/HTTP (`POST /v1/traces`, a
// protobuf body framed by Content-Length, HTTP/1.1 with keep-alive). It records each export
// request with its protocol and headers, and answers as its mode says: kOk, kFail (gRPC
// UNAVAILABLE, HTTP 503), or kStall (holds each request, unanswered, until the mode changes or
// the collector stops). Stop (and the destructor) ends every call and connection without
// waiting for clients.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"

namespace sluice::testing {

class FakeOtlpCollector {
 public:
  enum class Mode { kOk, kFail, kStall };
  enum class Protocol { kGrpc, kHttp };

  // One export request as received.
  struct Export {
    Protocol protocol = Protocol::kGrpc;
    opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
    // gRPC metadata or HTTP headers, names lower-cased.
    std::multimap<std::string, std::string> headers;
  };
  // One received span with what it came with.
  struct ReceivedSpan {
    Protocol protocol = Protocol::kGrpc;
    opentelemetry::proto::resource::v1::Resource resource;
    std::string resource_schema_url;
    opentelemetry::proto::common::v1::InstrumentationScope scope;
    opentelemetry::proto::trace::v1::Span span;
  };

  // Listens on two free loopback ports; gRPC with `grpc_credentials` (null: plaintext).
  static absl::StatusOr<std::unique_ptr<FakeOtlpCollector>> Start(
      std::shared_ptr<grpc::ServerCredentials> grpc_credentials = nullptr);
  ~FakeOtlpCollector();
  FakeOtlpCollector(const FakeOtlpCollector&) = delete;
  FakeOtlpCollector& operator=(const FakeOtlpCollector&) = delete;

  // "http://127.0.0.1:PORT" (for TLS credentials, "https://..." is the caller's to write).
  std::string grpc_endpoint() const;
  // "http://127.0.0.1:PORT/v1/traces".
  std::string http_endpoint() const;
  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }

  void SetMode(Mode mode);
  // A kOk answer's partial_success (both protocols): rejected_spans > 0 tells the exporter some
  // spans were refused.
  void SetPartialSuccess(int64_t rejected_spans, std::string message);
  // Closes every open HTTP connection, as a collector's idle timeout does.
  void CloseHttpConnections();

  // The spans of every request answered with success, in arrival order.
  std::vector<ReceivedSpan> Spans() const;
  // Every request that arrived, whatever its answer.
  std::vector<Export> Exports() const;
  // True once Spans() holds at least `n`, waiting up to `timeout`.
  bool WaitForSpans(size_t n, absl::Duration timeout) const;
  // True once `n` requests have arrived (whatever their answer), waiting up to `timeout`.
  bool WaitForExports(int n, absl::Duration timeout) const;
  // Requests arrived, whatever their answer.
  int exports() const;
  // HTTP connections accepted.
  int http_connections() const;

  // Answers held requests with UNAVAILABLE / 503, closes connections and stops listening.
  // Idempotent.
  void Stop();

 private:
  class State;
  class GrpcService;
  class HttpServer;
  FakeOtlpCollector() = default;

  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<State> state_;
  std::unique_ptr<GrpcService> grpc_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HttpServer> http_server_;
};

}  // namespace sluice::testing
