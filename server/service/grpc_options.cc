#include "server/service/grpc_options.h"

#include <algorithm>
#include <cstdint>

#include "grpcpp/resource_quota.h"

namespace sluice {
namespace {

// `duration` as gRPC's int milliseconds, at least 1 (gRPC reads 0 as "at once") and at most
// kMaxConnectionAgeMillis.
int ConnectionAgeMillis(absl::Duration duration) {
  const int64_t ms = absl::ToInt64Milliseconds(duration);
  return static_cast<int>(std::clamp<int64_t>(ms, 1, kMaxConnectionAgeMillis));
}

}  // namespace

void ApplyGrpcServerSettings(const GrpcServerSettings& settings, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(settings.max_receive_message_bytes);
  if (settings.polling_threads > 0) {
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS,
                                settings.polling_threads);
    // The callback API runs on gRPC's own executor; this caps its thread pool.
    builder.SetResourceQuota(grpc::ResourceQuota("sluice").SetMaxThreads(settings.polling_threads * 4));
  }
  if (settings.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, settings.max_concurrent_streams);
  }
  // Unset, gRPC's defaults are INT_MAX: no age limit, no grace limit.
  if (settings.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               ConnectionAgeMillis(settings.max_connection_age));
    if (settings.max_connection_age_grace > absl::ZeroDuration()) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                                 ConnectionAgeMillis(settings.max_connection_age_grace));
    }
  }
}

}  // namespace sluice
