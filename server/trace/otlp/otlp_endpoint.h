// The URLs of OTLP endpoints, "http[s]://host[:port][/path][?query]", read by libcurl's URL
// parser (curl_url) and held to what an OTLP exporter accepts: an http or https scheme, a host,
// a port from 1 to 65535, no user information (credentials go in headers) and no fragment.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

struct OtlpEndpoint {
  // https.
  bool tls = false;
  // As libcurl writes it: a DNS name or an IP literal, an IPv6 literal in brackets ("[::1]").
  std::string host;
  int port = 0;
  // From the '/' on, with any query ("/v1/traces", "/?x=1").
  std::string path;
  // The whole URL as libcurl writes it, with the default path when the URL had none:
  // "http://collector:4318/v1/traces". What the exporter requests and names in messages.
  std::string url;

  // "host:port" ("[::1]:4317"), the authority a gRPC channel targets.
  std::string Authority() const;
};

// Parses `url`. The port defaults to the scheme's (80, 443), and the path to `default_path` ("/"
// when empty) when the URL has none after its authority ("http://collector:4318"); a path given,
// even "/", or a query alone ("http://collector:4318?x=1" is ".../?x=1") is kept.
// kInvalidArgument naming the URL and what is wrong with it.
absl::StatusOr<OtlpEndpoint> ParseOtlpEndpoint(absl::string_view url,
                                               absl::string_view default_path);

}  // namespace sluice
