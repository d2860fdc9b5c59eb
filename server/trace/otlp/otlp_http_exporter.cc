#include "server/trace/otlp/otlp_http_exporter.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/trace/otlp/otlp_wire.h"

namespace sluice {

absl::StatusCode HttpStatusToCode(int status) {
  switch (status) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 408:
      return absl::StatusCode::kDeadlineExceeded;
    case 413:
      return absl::StatusCode::kResourceExhausted;
    case 429:
    case 502:
    case 503:
    case 504:
      return absl::StatusCode::kUnavailable;
    default:
      break;
  }
  if (status >= 400 && status < 500) {
    return absl::StatusCode::kFailedPrecondition;
  }
  if (status >= 500 && status < 600) {
    return absl::StatusCode::kInternal;
  }
  return absl::StatusCode::kUnknown;
}

absl::StatusOr<std::unique_ptr<OtlpHttpExporter>> OtlpHttpExporter::Create(
    OtlpExporterOptions options) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(options.endpoint, kOtlpHttpDefaultPath);
  if (!url.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("OTLP/HTTP endpoint: ", url.status().message()));
  }
  RETURN_IF_ERROR(ValidateOtlpHeaders(options.headers));
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OTLP/HTTP exporter: the timeout must be positive, not ",
        absl::FormatDuration(options.timeout)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> client, HttpClient::Create(*url, options.ca_file));
  return std::unique_ptr<OtlpHttpExporter>(
      new OtlpHttpExporter(std::move(options), *std::move(url), std::move(client)));
}

absl::Status OtlpHttpExporter::Export(absl::Span<const SpanData> spans) {
  std::string body;
  AppendExportRequest(spans, options_.resource, &body);
  absl::StatusOr<HttpResponse> response = client_->Post(
      url_.path, "application/x-protobuf", options_.headers, body, options_.timeout);
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat("exporting ", spans.size(), " spans by ", Describe(), ": ",
                                     response.status().message()));
  }
  if (response->status >= 200 && response->status < 300) {
    return absl::OkStatus();
  }
  // What the server sent may be anything (the body a protobuf google.rpc.Status, or text):
  // bytes are escaped, not interpreted, and the status line is cut to a readable length.
  return absl::Status(
      HttpStatusToCode(response->status),
      absl::StrCat("exporting ", spans.size(), " spans by ", Describe(), ": ",
                   absl::CHexEscape(response->status_line.substr(0, 128)),
                   response->body_start.empty() ? "" : ": ",
                   absl::CHexEscape(response->body_start)));
}

std::string OtlpHttpExporter::Describe() const { return "OTLP/HTTP to " + url_.ToString(); }

}  // namespace sluice
