// The gRPC server settings Sluice serves with, in one place, so that the benchmark's floor
// server (bench/floor) runs with exactly the same ones and measures gRPC's own cost.
// Stateless; call from one thread while building a server.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "grpcpp/server_builder.h"

namespace sluice {

struct GrpcServerSettings {
  // Completion-queue threads polling for RPCs (0: gRPC's default).
  int polling_threads = 0;
  // Largest request accepted, in bytes.
  int max_receive_message_bytes = 4 << 20;
  // Concurrent streams per HTTP/2 connection (0: gRPC's default).
  int max_concurrent_streams = 0;
  // A connection older than this is sent a GOAWAY (GRPC_ARG_MAX_CONNECTION_AGE_MS); gRPC core
  // draws a multiplier in [0.9, 1.1] per connection (MaxAgeFilter::Config::FromChannelArgs in
  // src/core/ext/filters/channel_idle/channel_idle_filter.cc, gRPC 1.51). Zero: never, and gRPC
  // adds no max-age filter to the connections. Held to kMaxConnectionAgeMillis.
  absl::Duration max_connection_age = absl::ZeroDuration();
  // After that GOAWAY, the connection is closed this much later, calls still running or not
  // (GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS; not jittered). Zero: never. Held likewise.
  absl::Duration max_connection_age_grace = absl::ZeroDuration();
};

// The longest age and grace gRPC's int milliseconds can carry: INT_MAX itself means unlimited.
inline constexpr int kMaxConnectionAgeMillis = 2147483646;

// Applies `settings` to `builder`. REQUIRES: before BuildAndStart.
void ApplyGrpcServerSettings(const GrpcServerSettings& settings, grpc::ServerBuilder& builder);

}  // namespace sluice
