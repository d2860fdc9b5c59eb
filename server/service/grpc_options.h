// The gRPC server settings Sluice serves with, in one place, so that the benchmark's floor
// server (bench/floor) runs with exactly the same ones and measures gRPC's own cost.
// Stateless; call from one thread while building a server.
#pragma once

#include <string>

#include "grpcpp/server_builder.h"

namespace sluice {

struct GrpcServerSettings {
  // Completion-queue threads polling for RPCs (0: gRPC's default).
  int polling_threads = 0;
  // Largest request accepted, in bytes.
  int max_receive_message_bytes = 4 << 20;
  // Concurrent streams per HTTP/2 connection (0: gRPC's default).
  int max_concurrent_streams = 0;
};

// Applies `settings` to `builder`. REQUIRES: before BuildAndStart.
void ApplyGrpcServerSettings(const GrpcServerSettings& settings, grpc::ServerBuilder& builder);

}  // namespace sluice
