// The settings both OTLP exporters take (otlp_grpc_exporter.h, otlp_http_exporter.h): where the
// collector is, how to reach it, and what the spans are sent as. A plain struct of values, not
// synchronized; the exporters check it when they are made.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/trace/otlp/otlp_encoding.h"

namespace sluice {

struct OtlpExporterOptions {
  // OTLP/gRPC: "http://host:port" (plaintext), "https://host:port" (TLS), or "host:port" (TLS
  // unless `insecure`). OTLP/HTTP: "http://host[:port][/path]" or "https://...", the path
  // "/v1/traces" when none is given.
  std::string endpoint;
  // OTLP/gRPC's "host:port" form only: plaintext instead of TLS.
  bool insecure = false;
  // Sent with every export (gRPC metadata, names lower-cased; HTTP headers): an API key, a
  // tenant. Names and values of printable ASCII; not the headers the protocol itself sets.
  std::vector<std::pair<std::string, std::string>> headers;
  // Each export's deadline: connecting, sending and the collector's answer together.
  absl::Duration timeout = absl::Seconds(10);
  // PEM CA certificates trusted for TLS, read when the exporter is made; empty: the system's.
  std::string ca_file;
  // Who the spans are from.
  OtlpResource resource;
};

// OK when every header may be sent; else kInvalidArgument naming the header and what is wrong.
absl::Status ValidateOtlpHeaders(const std::vector<std::pair<std::string, std::string>>& headers);

// The content of `ca_file` (OtlpExporterOptions::ca_file, which --tracing_ca gives), read when
// an exporter is made: kInvalidArgument naming --tracing_ca and the file when it cannot be read,
// is empty, or holds no PEM certificate.
absl::StatusOr<std::string> ReadOtlpCaFile(const std::string& ca_file);

}  // namespace sluice
