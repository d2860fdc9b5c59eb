// Exports spans to an OpenTelemetry collector over OTLP/HTTP with a protobuf body: each batch is
// one `POST /v1/traces` (or the URL's path) with Content-Type application/x-protobuf, made by
// libcurl on one easy handle, which keeps its connection alive between exports and makes a new
// one when the collector has closed it. Any 2xx answer is success; the body of the answer is not
// read for a partial success. Redirects are not followed: a 3xx is a failed export, as any other
// answer that is not 2xx.
//
// What libcurl gives: HTTP/1.1, or HTTP/2 when an https collector offers it (ALPN); TLS 1.2 or
// later, the collector's certificate checked against the CA file or else the system's trust
// store, and its name (DNS name or IP address) against the URL's host; proxies from the
// environment, as curl(1) reads them: `http_proxy` (and, as Go's net/http reads it, upstream's
// exporter among others, `HTTP_PROXY`) for an http:// collector, `https_proxy` or `HTTPS_PROXY`
// for an https:// one, `ALL_PROXY` for either, all but the hosts `NO_PROXY` (or `no_proxy`)
// names; a loopback collector too goes through a proxy unless NO_PROXY names it.
//
// REQUIRES: curl_global_init has run in this process before the exporter is made (server/main.cc
// calls it at start, before any thread; elsewhere, libcurl makes it on its first handle).
//
// Thread-safety: as SpanExporter (span_exporter.h): Export from one thread at a time.
#pragma once

#include <curl/curl.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/trace/otlp/otlp_endpoint.h"
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
  // How much of an error answer's body an error message keeps.
  static constexpr size_t kKeptBodyBytes = 256;

  // Checks `options` (endpoint URL, headers, a positive timeout; `insecure` is not used: the
  // URL's scheme decides) and reads the CA file (kInvalidArgument naming it when it cannot be
  // read or holds no PEM certificate); errors are kInvalidArgument naming what is wrong. Does not
  // connect: the first export does.
  static absl::StatusOr<std::unique_ptr<OtlpHttpExporter>> Create(OtlpExporterOptions options);
  ~OtlpHttpExporter() override;
  OtlpHttpExporter(const OtlpHttpExporter&) = delete;
  OtlpHttpExporter& operator=(const OtlpHttpExporter&) = delete;

  // Blocks for the request and the whole answer, all within the options' timeout (name
  // resolution, connecting, a proxy's tunnel and the TLS handshake included). A non-2xx answer is
  // an error of HttpStatusToCode's code whose message has the status line and the start of the
  // body; a failure to reach the collector (or its proxy), to agree on TLS, or an answer that is
  // not HTTP is kUnavailable; no answer within the timeout kDeadlineExceeded.
  absl::Status Export(absl::Span<const SpanData> spans) override;
  std::string Describe() const override;

  // Connections made so far (a reused connection is not counted again).
  int connections_made() const { return connections_made_; }

 private:
  struct Transfer;

  OtlpHttpExporter(OtlpExporterOptions options, OtlpEndpoint endpoint);
  // Sets every option of the handle that does not change between exports.
  absl::Status Configure(const std::string& ca_pem);

  struct HandleDeleter {
    void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
  };
  struct HeaderListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
  };

  const OtlpExporterOptions options_;
  const OtlpEndpoint endpoint_;
  // The request's headers, which the handle points to: destroyed after it.
  std::unique_ptr<curl_slist, HeaderListDeleter> header_list_;
  // Where libcurl's callbacks put the current export's answer, which the handle points to.
  std::unique_ptr<Transfer> transfer_;
  // Keeps the connection (and the TLS session) between exports.
  std::unique_ptr<CURL, HandleDeleter> handle_;
  int connections_made_ = 0;
};

}  // namespace sluice
