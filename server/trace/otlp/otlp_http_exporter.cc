#include "server/trace/otlp/otlp_http_exporter.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"
#include "server/trace/otlp/otlp_wire.h"

namespace sluice {
namespace {

// The Content-Type of OTLP/HTTP's binary protobuf encoding.
constexpr char kContentType[] = "Content-Type: application/x-protobuf";

// A variable's value, or "" when it is unset.
std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// libcurl's failures as canonical codes: the timeout is kDeadlineExceeded; everything else that
// stops a request (name resolution, connecting, the proxy, TLS, a broken connection, an answer
// that is not HTTP) is the collector being out of reach, kUnavailable.
absl::StatusCode CurlCodeToCode(CURLcode code) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return absl::StatusCode::kDeadlineExceeded;
    case CURLE_OUT_OF_MEMORY:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

}  // namespace

// The answer of the export in progress, as libcurl's callbacks receive it.
struct OtlpHttpExporter::Transfer {
  // The last status line received, without its CRLF: "HTTP/1.1 503 Service Unavailable" (an
  // interim 100 Continue's comes before the final one's, which replaces it).
  std::string status_line;
  // The start of the final answer's body (the rest is read and discarded), for messages.
  std::string body_start;
  // libcurl's own description of a failure (CURLOPT_ERRORBUFFER).
  char error[CURL_ERROR_SIZE] = {};

  void Reset() {
    status_line.clear();
    body_start.clear();
    error[0] = '\0';
  }

  static size_t OnHeader(char* data, size_t size, size_t count, void* self) {
    auto* transfer = static_cast<Transfer*>(self);
    absl::string_view line(data, size * count);
    if (absl::StartsWith(line, "HTTP/")) {
      transfer->status_line = std::string(absl::StripTrailingAsciiWhitespace(line));
      transfer->body_start.clear();
    }
    return size * count;
  }

  static size_t OnBody(char* data, size_t size, size_t count, void* self) {
    auto* transfer = static_cast<Transfer*>(self);
    const size_t room = kKeptBodyBytes - transfer->body_start.size();
    transfer->body_start.append(data, std::min(room, size * count));
    return size * count;
  }
};

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
  absl::StatusOr<OtlpEndpoint> endpoint = ParseOtlpEndpoint(options.endpoint, kOtlpHttpDefaultPath);
  if (!endpoint.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("OTLP/HTTP endpoint: ", endpoint.status().message()));
  }
  RETURN_IF_ERROR(ValidateOtlpHeaders(options.headers));
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OTLP/HTTP exporter: the timeout must be positive, not ",
        absl::FormatDuration(options.timeout)));
  }
  std::string ca_pem;
  if (endpoint->tls && !options.ca_file.empty()) {
    ASSIGN_OR_RETURN(ca_pem, ReadOtlpCaFile(options.ca_file));
  }
  std::unique_ptr<OtlpHttpExporter> exporter(
      new OtlpHttpExporter(std::move(options), *std::move(endpoint)));
  RETURN_IF_ERROR(exporter->Configure(ca_pem));
  return exporter;
}

OtlpHttpExporter::OtlpHttpExporter(OtlpExporterOptions options, OtlpEndpoint endpoint)
    : options_(std::move(options)),
      endpoint_(std::move(endpoint)),
      transfer_(std::make_unique<Transfer>()),
      handle_(curl_easy_init()) {}

OtlpHttpExporter::~OtlpHttpExporter() = default;

absl::Status OtlpHttpExporter::Configure(const std::string& ca_pem) {
  CURL* const handle = handle_.get();
  if (handle == nullptr) {
    return absl::InternalError(absl::StrCat(Describe(), ": libcurl cannot make a handle"));
  }
  // Each header is "Name: value"; libcurl sends "Name;" as a header with an empty value (and
  // "Name:" not at all). Expect and Accept are libcurl's own, which a collector has no use for:
  // "Expect: 100-continue" would hold large batches back for a round trip.
  curl_slist* list = nullptr;
  auto add = [&list](const std::string& line) {
    curl_slist* longer = curl_slist_append(list, line.c_str());
    if (longer != nullptr) {
      list = longer;
    }
    return longer != nullptr;
  };
  bool added = add(kContentType) && add("Expect:") && add("Accept:");
  for (const auto& [name, value] : options_.headers) {
    added = added && add(value.empty() ? absl::StrCat(name, ";") : absl::StrCat(name, ": ", value));
  }
  header_list_.reset(list);
  if (!added) {
    return absl::ResourceExhaustedError(absl::StrCat(Describe(), ": no memory for the headers"));
  }

  CURLcode set = CURLE_OK;
  auto option = [&set, handle](CURLoption name, auto value) {
    if (set == CURLE_OK) {
      set = curl_easy_setopt(handle, name, value);
    }
  };
  option(CURLOPT_URL, endpoint_.url.c_str());
  option(CURLOPT_PROTOCOLS_STR, "http,https");
  option(CURLOPT_FOLLOWLOCATION, 0L);
  // The exporter's thread is not the process's only one: no SIGALRM for timeouts, and SIGPIPE
  // kept from a connection the collector closed.
  option(CURLOPT_NOSIGNAL, 1L);
  option(CURLOPT_POST, 1L);
  option(CURLOPT_HTTPHEADER, header_list_.get());
  option(CURLOPT_USERAGENT, "sluice-otlp");
  option(CURLOPT_TIMEOUT_MS,
         static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.timeout))));
  option(CURLOPT_ERRORBUFFER, transfer_->error);
  option(CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  option(CURLOPT_HEADERDATA, transfer_.get());
  option(CURLOPT_WRITEFUNCTION, &Transfer::OnBody);
  option(CURLOPT_WRITEDATA, transfer_.get());
  option(CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  option(CURLOPT_SSL_VERIFYPEER, 1L);
  option(CURLOPT_SSL_VERIFYHOST, 2L);
  if (!ca_pem.empty()) {
    // The CA file is the whole of what is trusted, as --tracing_ca says: the system's bundle
    // (CAINFO, which the blob replaces) and directory (CAPATH) are not consulted.
    curl_blob blob{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
    option(CURLOPT_CAINFO_BLOB, &blob);
    option(CURLOPT_CAPATH, static_cast<const char*>(nullptr));
  }
  // libcurl reads http_proxy, not HTTP_PROXY, for http:// URLs (a guard for CGI programs, whose
  // request headers arrive as HTTP_* variables); Go's net/http, which upstream's exporter and
  // OpenTelemetry's Go exporters use, reads both. NO_PROXY still applies to a proxy set here.
  if (!endpoint_.tls && Env("http_proxy").empty() && !Env("HTTP_PROXY").empty()) {
    const std::string proxy = Env("HTTP_PROXY");
    option(CURLOPT_PROXY, proxy.c_str());  // copied by libcurl
  }
  if (set != CURLE_OK) {
    return absl::InternalError(
        absl::StrCat(Describe(), ": libcurl refused an option: ", curl_easy_strerror(set)));
  }
  return absl::OkStatus();
}

absl::Status OtlpHttpExporter::Export(absl::Span<const SpanData> spans) {
  CURL* const handle = handle_.get();
  std::string body;
  AppendExportRequest(spans, options_.resource, &body);
  transfer_->Reset();
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.data());
  const CURLcode performed = curl_easy_perform(handle);
  // The body is gone after this call: the handle must not keep pointing at it.
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(0));
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, "");
  long connects = 0;
  if (curl_easy_getinfo(handle, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK) {
    connections_made_ += static_cast<int>(connects);
  }
  if (performed != CURLE_OK) {
    const absl::string_view detail =
        transfer_->error[0] != '\0' ? transfer_->error : curl_easy_strerror(performed);
    return absl::Status(CurlCodeToCode(performed),
                        absl::StrCat("exporting ", spans.size(), " spans by ", Describe(), ": ",
                                     absl::StripTrailingAsciiWhitespace(detail)));
  }
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) {
    return absl::OkStatus();
  }
  // What the server sent may be anything (the body a protobuf google.rpc.Status, or text):
  // bytes are escaped, not interpreted, and the status line is cut to a readable length.
  return absl::Status(
      HttpStatusToCode(static_cast<int>(status)),
      absl::StrCat("exporting ", spans.size(), " spans by ", Describe(), ": ",
                   absl::CHexEscape(transfer_->status_line.substr(0, 128)),
                   transfer_->body_start.empty() ? "" : ": ",
                   absl::CHexEscape(transfer_->body_start)));
}

std::string OtlpHttpExporter::Describe() const { return "OTLP/HTTP to " + endpoint_.url; }

}  // namespace sluice
