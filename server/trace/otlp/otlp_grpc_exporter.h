// Exports spans to an OpenTelemetry collector over OTLP/gRPC: each batch is one unary call of
// /opentelemetry.proto.collector.trace.v1.TraceService/Export on one channel, which gRPC keeps
// connected (and reconnects) between calls.
//
// Thread-safety: as SpanExporter (span_exporter.h): Export from one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "server/trace/otlp/otlp_exporter_options.h"
#include "server/trace/otlp/span_exporter.h"

namespace sluice {

// Where an OTLP/gRPC endpoint points.
struct OtlpGrpcTarget {
  // "host:port" ("[v6]:port"), the channel's target.
  std::string authority;
  bool tls = false;
};

// Parses an OTLP/gRPC endpoint: "http://host[:port]" (plaintext, port 80 by default),
// "https://host[:port]" (TLS, 443), or "host:port" (TLS unless `insecure`). A path other than
// "/" is an error: gRPC's path is the method's. kInvalidArgument naming the endpoint.
absl::StatusOr<OtlpGrpcTarget> ParseOtlpGrpcEndpoint(absl::string_view endpoint, bool insecure);

class OtlpGrpcExporter final : public SpanExporter {
 public:
  // Checks `options` (endpoint, headers, a positive timeout) and reads the CA file; errors are
  // kInvalidArgument naming what is wrong. Does not connect: the first export does.
  static absl::StatusOr<std::unique_ptr<OtlpGrpcExporter>> Create(OtlpExporterOptions options);

  // A collector's error is returned with its gRPC code (codes are absl's); a partial success
  // that rejected spans is kInvalidArgument naming how many and the collector's message.
  absl::Status Export(absl::Span<const SpanData> spans) override;
  std::string Describe() const override;

 private:
  OtlpGrpcExporter(OtlpExporterOptions options, OtlpGrpcTarget target,
                   std::shared_ptr<grpc::Channel> channel);

  const OtlpExporterOptions options_;
  const OtlpGrpcTarget target_;
  // The request's bytes are written by AppendExportRequest (otlp_wire.h) and sent as they are:
  // a generic stub, not the generated one, which would need them as a message.
  grpc::GenericStub stub_;
};

}  // namespace sluice
