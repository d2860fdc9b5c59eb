// A small C++ client for any Envoy RLS v3 server (Sluice or envoyproxy/ratelimit), for services
// that want to ask for a decision directly, and the base of sluicectl and sluice-bench.
// An RlsClient is thread-safe: one instance may serve every thread of a process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace sluice {

using RlsRequest = envoy::service::ratelimit::v3::RateLimitRequest;
using RlsResponse = envoy::service::ratelimit::v3::RateLimitResponse;

class RlsClient {
 public:
  // Connects lazily to `address` (HOST:PORT) over plaintext gRPC.
  explicit RlsClient(const std::string& address);
  // Uses an existing channel.
  explicit RlsClient(std::shared_ptr<grpc::Channel> channel);

  // One blocking call; the gRPC error (code and message) on failure.
  absl::StatusOr<RlsResponse> ShouldRateLimit(const RlsRequest& request, absl::Duration timeout);

  envoy::service::ratelimit::v3::RateLimitService::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<envoy::service::ratelimit::v3::RateLimitService::Stub> stub_;
};

// Builds a request from command-line style descriptors: each "key=value[,key=value...]" is one
// descriptor; a bare "key" means an entry with an empty value. hits 0 leaves hits_addend unset.
absl::StatusOr<RlsRequest> BuildRequest(absl::string_view domain,
                                        const std::vector<std::string>& descriptors,
                                        uint32_t hits);

// A readable table of a response, one row per descriptor:
//   DESCRIPTOR          CODE        LIMIT         REMAINING  RESET
//   user=alice          OK          10/second     9          0.100s
std::string FormatResponseTable(const RlsRequest& request, const RlsResponse& response);

}  // namespace sluice
