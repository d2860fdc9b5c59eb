// A management server for tests of the xDS config client: an in-process gRPC server of
// envoy.service.discovery.v3.AggregatedDiscoveryService (state of the world) that records every
// request it is sent and pushes the snapshot the test sets, as a real one does: the latest
// snapshot to each stream as it opens, and each new snapshot to every open stream. It can also
// stay silent (accept streams, never answer), stop (every stream ends) and start again on the
// same port. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "envoy/service/discovery/v3/discovery.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "server/common/mutex.h"

namespace sluice::testing {

class FakeAdsServer {
 public:
  // One request as the server received it, with the stream's metadata.
  struct Received {
    envoy::service::discovery::v3::DiscoveryRequest request;
    std::multimap<std::string, std::string> metadata;
    int stream = 0;  // the stream's number, from 1 in the order they opened
  };

  // Listens on 127.0.0.1:`port` (0: a free one) with `credentials` (null: plaintext).
  static absl::StatusOr<std::unique_ptr<FakeAdsServer>> Start(
      int port = 0, std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);
  ~FakeAdsServer();

  int port() const { return port_; }
  std::string address() const;

  // Sets the snapshot (version, resources) with a new nonce, which it returns, and sends it to
  // every open stream (and to each stream that opens later).
  std::string Push(const std::string& version,
                   const std::vector<ratelimit::config::ratelimit::v3::RateLimitConfig>& resources);
  // As Push, with resources already packed (a wrong type, a huge one).
  std::string PushAny(const std::string& version, std::vector<google::protobuf::Any> resources);
  // Nonces of later pushes are "<prefix>nonce-<n>" (a long prefix makes a long nonce).
  void SetNoncePrefix(const std::string& prefix);
  // Silent: streams are accepted and their requests recorded, but nothing is sent.
  void SetSilent(bool silent);
  // Ends every stream and stops listening (the port is released).
  void Stop();

  // The first request received at index `from` or later that `match` accepts, waiting up to
  // `timeout`; nullopt if none came. Pass the returned index + 1 to wait for a later one.
  std::optional<std::pair<size_t, Received>> WaitFor(
      size_t from, const std::function<bool(const Received&)>& match, absl::Duration timeout);
  size_t requests() const;
  int streams() const;

 private:
  class Service;
  FakeAdsServer() = default;

  int port_ = 0;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

// A RateLimitConfig of one domain, `name` "xds-<domain>", with one descriptor `key`=`value`
// (value empty: none) limited to `requests_per_unit` a `unit`.
ratelimit::config::ratelimit::v3::RateLimitConfig Domain(
    const std::string& domain, const std::string& key, const std::string& value,
    uint32_t requests_per_unit,
    ratelimit::config::ratelimit::v3::RateLimitUnit unit = ratelimit::config::ratelimit::v3::MINUTE);

}  // namespace sluice::testing
