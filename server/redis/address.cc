#include "server/redis/address.h"

#include <charconv>

#include "absl/strings/str_cat.h"

namespace sluice {

bool IsPlausibleHost(std::string_view host) {
  if (host.empty() || host.size() > 255) {
    return false;
  }
  for (char c : host) {
    if (c <= ' ' || c > '~') {  // char may be signed: bytes from 0x80 are negative
      return false;
    }
  }
  return true;
}

absl::Status SplitHostPort(std::string_view address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  std::string text(address);
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(absl::StrCat("redis address '", text, "' is not host:port"));
  }
  std::string_view host_part = address.substr(0, colon);
  if (host_part.front() == '[') {
    if (host_part.size() < 3 || host_part.back() != ']') {
      return absl::InvalidArgumentError(
          absl::StrCat("redis address '", text, "' has a malformed [IPv6] host"));
    }
    host_part = host_part.substr(1, host_part.size() - 2);
  }
  std::string_view port_part = address.substr(colon + 1);
  int value = 0;
  auto [end, error] = std::from_chars(port_part.data(), port_part.data() + port_part.size(), value);
  if (error != std::errc() || end != port_part.data() + port_part.size() || value <= 0 ||
      value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address '", text, "' has an invalid port"));
  }
  *host = std::string(host_part);
  *port = value;
  return absl::OkStatus();
}

}  // namespace sluice
