#include "server/service/grpc_options.h"

#include "grpcpp/resource_quota.h"

namespace sluice {

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
}

}  // namespace sluice
