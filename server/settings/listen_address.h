// Checks listen and server addresses given in flags and environment variables before anything
// uses them, so that a typo stops the start with a message instead of being misread: gRPC takes
// "127.0.0.1:65536" as port 0 (any free port) and ":99999" as port 34463 (the number modulo
// 65536). Pure functions; thread-safe.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// "HOST:PORT" or "[IPv6]:PORT": a non-empty host and a decimal port from `min_port` to 65535.
// kInvalidArgument saying what is wrong, quoting `address` (which the caller prefixes with the
// flag or variable it came from).
absl::Status ValidateHostPort(absl::string_view address, int min_port);

// What --grpc_address accepts: HOST:PORT with a port from 0 (any free port) to 65535, or a unix
// domain socket as gRPC names it, "unix:PATH" or "unix-abstract:NAME".
absl::Status ValidateGrpcListenAddress(absl::string_view address);

// Whether HOST:PORT listens on loopback only: a host of 127.0.0.0/8, ::1 ([::1]:PORT) or
// "localhost" (which resolves to those). False for anything else, a wildcard (0.0.0.0, [::],
// an empty host) or a name included, and for text that is not HOST:PORT.
bool IsLoopbackListenAddress(absl::string_view address);

}  // namespace sluice
