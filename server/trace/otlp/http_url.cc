#include "server/trace/otlp/http_url.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sluice {
namespace {

absl::Status Invalid(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("URL \"", url, "\": ", why));
}

bool IsHostChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

}  // namespace

std::string HttpUrl::Authority() const {
  const bool v6 = absl::StrContains(host, ':');
  return absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

std::string HttpUrl::HostHeader() const {
  if (port == (tls ? 443 : 80)) {
    return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]") : host;
  }
  return Authority();
}

std::string HttpUrl::ToString() const {
  return absl::StrCat(tls ? "https://" : "http://", Authority(), path);
}

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url, absl::string_view default_path) {
  HttpUrl parsed;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "http://")) {
    parsed.tls = false;
  } else if (absl::ConsumePrefix(&rest, "https://")) {
    parsed.tls = true;
  } else {
    return Invalid(url, "must start with http:// or https://");
  }
  if (absl::StrContains(rest, '#')) {
    return Invalid(url, "a fragment (#) has no meaning here");
  }
  const size_t path_start = rest.find_first_of("/?");
  absl::string_view authority = rest.substr(0, path_start);
  if (path_start == absl::string_view::npos) {
    parsed.path = std::string(default_path);
  } else if (rest[path_start] == '?') {
    parsed.path = absl::StrCat("/", rest.substr(path_start));
  } else {
    parsed.path = std::string(rest.substr(path_start));
  }
  if (absl::StrContains(authority, '@')) {
    return Invalid(url, "user information (user@) is not supported; send credentials as headers");
  }

  absl::string_view port_text;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return Invalid(url, "an IPv6 address misses its closing ]");
    }
    parsed.host = std::string(authority.substr(0, close));
    if (parsed.host.empty() || !absl::StrContains(parsed.host, ':')) {
      return Invalid(url, "brackets hold an IPv6 address only");
    }
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) {
      return Invalid(url, "expected :port after the IPv6 address");
    }
    port_text = after;
    if (port_text.empty() && authority.size() > close + 1) {
      return Invalid(url, "the port is empty");
    }
  } else {
    const size_t colon = authority.find(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) {
        return Invalid(url, "the port is empty");
      }
    }
    for (char c : parsed.host) {
      if (!IsHostChar(c)) {
        return Invalid(url, absl::StrCat("the host \"", parsed.host, "\" holds '",
                                         std::string(1, c), "'"));
      }
    }
  }
  if (parsed.host.empty()) {
    return Invalid(url, "the host is missing");
  }
  if (port_text.empty()) {
    parsed.port = parsed.tls ? 443 : 80;
  } else {
    int port = 0;
    const bool digits = std::all_of(port_text.begin(), port_text.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c));
    });
    if (!digits || port_text.size() > 5 || !absl::SimpleAtoi(port_text, &port) || port < 1 ||
        port > 65535) {
      return Invalid(url, absl::StrCat("the port \"", port_text, "\" is not 1 to 65535"));
    }
    parsed.port = port;
  }
  return parsed;
}

}  // namespace sluice
