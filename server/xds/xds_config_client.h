// Keeps the config in force in step with a management server, as envoyproxy/ratelimit's
// CONFIG_TYPE=GRPC_XDS_SOTW does: one aggregated discovery stream
// (envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources) subscribed
// to every RateLimitConfig resource (state of the world: each response holds every domain).
//
// Each response is read and validated whole by the same validator as YAML files
// (xds_config_reader.h). A valid one is swapped into the store and ACKed (version_info = its
// version, response_nonce = its nonce); an invalid one is NACKed with error_detail saying what
// is wrong (resource, descriptor path, field) and the version of the config still in force, which
// keeps deciding. When the stream breaks or the server cannot be reached, the last config
// accepted keeps deciding; the client connects again after --xds_connect_retry_interval (never
// reached) or the back-off (a stream that had worked), and logs once per outage, not per retry.
// A new stream announces the version in force, so a server that has nothing newer need not
// resend it (most resend anyway; the same snapshot is simply applied again).
//
// Thread-safe. The client runs on a thread of its own between Start and Stop; the listener and
// the connection observer run on that thread.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "envoy/service/discovery/v3/discovery.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/common/mutex.h"
#include "server/config/config.h"
#include "server/config/config_store.h"
#include "server/config/config_validator.h"
#include "server/settings/settings.h"

namespace sluice {

class XdsConfigClient {
 public:
  // After each response: the config put in force (null when the response was rejected) with
  // its xDS version, or why it was rejected.
  using Listener = std::function<void(const Config* accepted, const std::string& version,
                                      const absl::Status& rejected)>;
  // When a stream starts delivering (true) and when it ends (false).
  using ConnectionObserver = std::function<void(bool connected)>;

  XdsConfigClient(XdsSettings settings, ValidateOptions validate, ConfigStore& store,
                  Listener listener, ConnectionObserver on_connection);
  // Stop().
  ~XdsConfigClient();
  XdsConfigClient(const XdsConfigClient&) = delete;
  XdsConfigClient& operator=(const XdsConfigClient&) = delete;

  // Starts the thread. REQUIRES: once.
  void Start();
  // Waits until a response has been accepted (true), or `timeout` passes, or Stop (false).
  bool WaitForConfig(absl::Duration timeout);
  // Cancels the stream and joins the thread. Quick: a stream is cancelled, a wait is cut short.
  void Stop();

 private:
  using Stream = grpc::ClientReaderWriterInterface<envoy::service::discovery::v3::DiscoveryRequest,
                                                   envoy::service::discovery::v3::DiscoveryResponse>;

  void Run();
  // One stream, from connecting until it ends; returns how it ended, and in `delivered`
  // whether a response came.
  grpc::Status RunStream(bool* delivered);
  // The channel's credentials; an error when a TLS file cannot be read.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials() const;
  // Validates `response`, puts it in force or not, and answers with an ACK or a NACK.
  bool Apply(const envoy::service::discovery::v3::DiscoveryResponse& response, Stream& stream);
  envoy::service::discovery::v3::DiscoveryRequest Request(const std::string& nonce) const;
  // The wait before the next attempt, after one that `delivered` or not.
  absl::Duration NextWait(bool delivered);
  // Sleeps `wait` unless Stop comes first; false on Stop.
  bool Sleep(absl::Duration wait);

  const XdsSettings settings_;
  const ValidateOptions validate_;
  ConfigStore& store_;
  const Listener listener_;
  const ConnectionObserver on_connection_;

  // Touched by the client's thread only.
  std::string version_;  // of the config in force ("" before the first)
  absl::Duration backoff_;
  bool in_outage_ = false;
  std::mt19937_64 random_;

  Mutex mu_;
  CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // of the stream running
  std::thread thread_;
};

}  // namespace sluice
