// Exports spans to an OpenTelemetry collector over OTLP/HTTP with a protobuf body: each batch is
// one `POST /v1/traces` (or the URL's path) with Content-Type application/x-protobuf, over one
// HTTP/1.1 connection kept alive between exports (http_client.h). Any 2xx answer is success; the
// body of the answer is not read for a partial success.
//
// Thread-safety: as SpanExporter (span_exporter.h): Export from one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/trace/otlp/http_client.h"
#include "server/trace/otlp/http_url.h"
#include "server/trace/otlp/otlp_exporter_options.h"
#include "server/trace/otlp/span_exporter.h"

namespace sluice {

// The path of a URL that names none.
inline constexpr absl::string_view kOtlpHttpDefaultPath = "/v1/traces";

// The canonical code for an HTTP status that is not 2xx: 429, 502, 503 and 504 kUnavailable (try
// later), 400 kInvalidArgument, 401 kUnauthenticated, 403 kPermissionDenied, 404 kNotFound,
// 408 kDeadlineExceeded, 413 kResourceExhausted, other 4xx kFailedPrecondition, other 5xx
// kInternal, anything else kUnknown.
absl::StatusCode HttpStatusToCode(int status);

class OtlpHttpExporter final : public SpanExporter {
 public:
  // Checks `options` (endpoint URL, headers, a positive timeout; `insecure` is not used: the
  // URL's scheme decides) and, for https, reads the CA file; errors are kInvalidArgument naming
  // what is wrong. Does not connect: the first export does.
  static absl::StatusOr<std::unique_ptr<OtlpHttpExporter>> Create(OtlpExporterOptions options);

  // A non-2xx answer is an error of HttpStatusToCode's code whose message has the status line
  // and the start of the body; a failure to reach the collector is kUnavailable, no answer
  // within the timeout kDeadlineExceeded.
  absl::Status Export(absl::Span<const SpanData> spans) override;
  std::string Describe() const override;

  // Connections made so far (for tests of the connection's reuse).
  int connections_made() const { return client_->connections_made(); }

 private:
  OtlpHttpExporter(OtlpExporterOptions options, HttpUrl url, std::unique_ptr<HttpClient> client)
      : options_(std::move(options)), url_(std::move(url)), client_(std::move(client)) {}

  const OtlpExporterOptions options_;
  const HttpUrl url_;
  const std::unique_ptr<HttpClient> client_;
};

}  // namespace sluice
