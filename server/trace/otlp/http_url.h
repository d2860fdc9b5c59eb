// The URLs of OTLP endpoints: "http://host[:port][/path]" and "https://host[:port][/path]",
// split into what a connection needs. Only what OTLP exporters need is accepted: no user
// information, no fragment.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

struct HttpUrl {
  // https.
  bool tls = false;
  // A DNS name or an IP literal; an IPv6 literal without its brackets.
  std::string host;
  int port = 0;
  // From the '/' on, with any query; "" when the URL has none and no default was given.
  std::string path;

  // "host:port" (IPv6: "[host]:port"), the authority a gRPC channel targets.
  std::string Authority() const;
  // The Host header's value: the authority, without the port when it is the scheme's default.
  std::string HostHeader() const;
  // The URL written back ("https://collector:4318/v1/traces").
  std::string ToString() const;
};

// Parses `url`. The port defaults to the scheme's (80, 443); the path to `default_path` when the
// URL has none ("http://collector:4318"); a path given, even "/", is kept as given.
// kInvalidArgument naming the URL and what is wrong with it.
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url, absl::string_view default_path);

}  // namespace sluice
