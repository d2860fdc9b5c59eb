#include "server/trace/otlp/otlp_grpc_exporter.h"

#include <chrono>
#include <future>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "server/common/status_macros.h"
#include "server/trace/otlp/otlp_endpoint.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "server/trace/otlp/otlp_wire.h"

namespace sluice {
namespace {

namespace collector = ::opentelemetry::proto::collector::trace::v1;

// gRPC waits up to two minutes between reconnection attempts by default, and fails calls at once
// meanwhile: a collector back from a restart would lose every batch of those minutes.
constexpr int kMaxReconnectBackoffMs = 5000;

constexpr char kExportMethod[] = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

}  // namespace

absl::StatusOr<OtlpGrpcTarget> ParseOtlpGrpcEndpoint(absl::string_view endpoint, bool insecure) {
  const bool has_scheme =
      absl::StartsWith(endpoint, "http://") || absl::StartsWith(endpoint, "https://");
  if (!has_scheme && absl::StrContains(endpoint, "://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OTLP/gRPC endpoint \"", endpoint, "\": must be http://, https:// or host:port"));
  }
  const std::string url =
      has_scheme ? std::string(endpoint)
                 : absl::StrCat(insecure ? "http://" : "https://", endpoint);
  absl::StatusOr<OtlpEndpoint> parsed = ParseOtlpEndpoint(url, "");
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("OTLP/gRPC endpoint \"", endpoint, "\": ", parsed.status().message()));
  }
  if (parsed->path != "/") {
    return absl::InvalidArgumentError(absl::StrCat(
        "OTLP/gRPC endpoint \"", endpoint, "\": has a path; gRPC's is the method's"));
  }
  const size_t bracket = endpoint.rfind(']');
  const absl::string_view after_host =
      bracket == absl::string_view::npos ? endpoint : endpoint.substr(bracket + 1);
  if (!has_scheme && !absl::StrContains(after_host, ':')) {
    return absl::InvalidArgumentError(
        absl::StrCat("OTLP/gRPC endpoint \"", endpoint, "\": host:port needs the port"));
  }
  return OtlpGrpcTarget{parsed->Authority(), parsed->tls};
}

absl::StatusOr<std::unique_ptr<OtlpGrpcExporter>> OtlpGrpcExporter::Create(
    OtlpExporterOptions options) {
  ASSIGN_OR_RETURN(OtlpGrpcTarget target,
                   ParseOtlpGrpcEndpoint(options.endpoint, options.insecure));
  RETURN_IF_ERROR(ValidateOtlpHeaders(options.headers));
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OTLP/gRPC exporter: the timeout must be positive, not ",
        absl::FormatDuration(options.timeout)));
  }
  for (auto& [name, value] : options.headers) {
    name = absl::AsciiStrToLower(name);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (target.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadOtlpCaFile(options.ca_file));
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  args.SetString(GRPC_ARG_PRIMARY_USER_AGENT_STRING, "sluice-otlp");
  auto channel = grpc::CreateCustomChannel(target.authority, credentials, args);
  return std::unique_ptr<OtlpGrpcExporter>(
      new OtlpGrpcExporter(std::move(options), std::move(target), std::move(channel)));
}

OtlpGrpcExporter::OtlpGrpcExporter(OtlpExporterOptions options, OtlpGrpcTarget target,
                                   std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)), target_(std::move(target)), stub_(std::move(channel)) {}

absl::Status OtlpGrpcExporter::Export(absl::Span<const SpanData> spans) {
  std::string body;
  AppendExportRequest(spans, options_.resource, &body);
  grpc::Slice slice(std::move(body));
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options_.timeout));
  for (const auto& [name, value] : options_.headers) {
    context.AddMetadata(name, value);
  }
  grpc::ByteBuffer reply;
  std::promise<grpc::Status> done;
  stub_.UnaryCall(&context, kExportMethod, grpc::StubOptions(), &request, &reply,
                  [&done](grpc::Status status) { done.set_value(std::move(status)); });
  grpc::Status status = done.get_future().get();
  collector::ExportTraceServiceResponse response;
  if (status.ok()) {
    grpc::ProtoBufferReader reader(&reply);
    if (!response.ParseFromZeroCopyStream(&reader)) {
      status = grpc::Status(grpc::StatusCode::INTERNAL, "the collector's answer does not parse");
    }
  }
  if (!status.ok()) {
    std::string message = status.error_message();
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      absl::StrAppend(&message, " (timeout ", absl::FormatDuration(options_.timeout), ")");
    }
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("exporting ", spans.size(), " spans by ", Describe(), ": ",
                                     message));
  }
  if (response.has_partial_success() && response.partial_success().rejected_spans() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exporting ", spans.size(), " spans by ", Describe(), ": the collector rejected ",
        response.partial_success().rejected_spans(), ": ",
        response.partial_success().error_message()));
  }
  return absl::OkStatus();
}

std::string OtlpGrpcExporter::Describe() const {
  return absl::StrCat("OTLP/gRPC to ", target_.tls ? "https://" : "http://", target_.authority);
}

}  // namespace sluice
