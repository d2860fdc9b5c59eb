#include "server/settings/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sluice {

absl::Status ValidateHostPort(absl::string_view address, int min_port) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not HOST:PORT"));
  }
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (absl::StartsWith(host, "[")) {
    if (host.size() < 3 || !absl::EndsWith(host, "]")) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", address, "' has a malformed [IPv6] host"));
    }
    host = host.substr(1, host.size() - 2);
  } else if (absl::StrContains(host, ':')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", address, "' is not HOST:PORT (write an IPv6 host in brackets: [::1]:8081)"));
  }
  int64_t value = 0;
  bool digits = !port.empty() && port.size() <= 6;
  for (char c : port) {
    digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
    value = value * 10 + (c - '0');
  }
  if (!digits || value < min_port || value > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "': port '", port,
                                                   "' is not a number from ", min_port,
                                                   " to 65535"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' has no host before ':PORT'"));
  }
  return absl::OkStatus();
}

absl::Status ValidateGrpcListenAddress(absl::string_view address) {
  for (absl::string_view scheme : {"unix:", "unix-abstract:"}) {
    if (absl::StartsWith(address, scheme)) {
      if (address.size() == scheme.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", address, "' names no socket (", scheme, "PATH)"));
      }
      return absl::OkStatus();
    }
  }
  return ValidateHostPort(address, 0);
}

bool IsLoopbackListenAddress(absl::string_view address) {
  if (!ValidateHostPort(address, 0).ok()) {
    return false;
  }
  absl::string_view host = address.substr(0, address.rfind(':'));
  if (absl::ConsumePrefix(&host, "[")) {
    host.remove_suffix(1);
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) {
    return true;
  }
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace sluice
