// Redis server addresses as the flags and the cluster write them. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace sluice {

// An address that starts with this names a unix domain socket: "unix:/run/redis.sock"
// (standalone Redis only).
inline constexpr std::string_view kUnixAddressPrefix = "unix:";
inline bool IsUnixAddress(std::string_view address) {
  return address.substr(0, kUnixAddressPrefix.size()) == kUnixAddressPrefix;
}

// Whether `host`, as a peer names it (a sentinel's master, a node in CLUSTER SLOTS or in a MOVED
// or ASK redirect), can be a host name or an IP literal: 1 to 255 bytes of printable ASCII, no
// space. Anything else is refused where it arrives, so that an address Sluice keeps never
// carries a peer's arbitrary bytes into log lines, status messages or metric labels.
bool IsPlausibleHost(std::string_view host);

// Splits "host:port" or "[v6-address]:port" (brackets removed). kInvalidArgument, naming the
// address, if it is malformed or the port is not in 1..65535.
absl::Status SplitHostPort(std::string_view address, std::string* host, int* port);

}  // namespace sluice
