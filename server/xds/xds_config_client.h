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
// What the management server sends is remote text, bounded before it is kept, sent back or
// logged. A version_info or nonce longer than kMaxXdsVersionBytes is NACKed (the version in
// force is sent back in every request). A NACK's error_detail is at most kMaxNackDetailBytes,
// escaped (LogText, log_text.h). Log lines show versions and messages escaped and cut, and the
// lines a server can repeat at will (a snapshot rejected or put in force, a stream that ends) go
// through a LogThrottle (log_throttle.h): the first of each new kind is logged, a flood costs a
// line every few seconds, a snapshot resent on each reconnection a line a minute, and the next
// line logged says how many were not.
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
#include "server/common/clock.h"
#include "server/common/mutex.h"
#include "server/config/config.h"
#include "server/config/config_store.h"
#include "server/config/config_validator.h"
#include "server/settings/settings.h"
#include "server/xds/log_throttle.h"

namespace sluice {

// The longest version_info or nonce accepted. Management servers use counters ("42"),
// timestamps with a counter, hashes (64 hex digits) and UUIDs: tens of bytes.
inline constexpr size_t kMaxXdsVersionBytes = 4096;
// The most of an error message a NACK's error_detail carries.
inline constexpr size_t kMaxNackDetailBytes = 4096;

class XdsConfigClient {
 public:
  // After each response: the config put in force (null when the response was rejected) with
  // its xDS version, or why it was rejected. The version is the server's text as sent (of any
  // length when rejected): bound it (LogText) before logging it or using it as a label.
  using Listener = std::function<void(const Config* accepted, const std::string& version,
                                      const absl::Status& rejected)>;
  // When a stream starts delivering (true) and when it ends (false).
  using ConnectionObserver = std::function<void(bool connected)>;

  // `clock` paces the log (LogThrottle) and must outlive the client.
  XdsConfigClient(XdsSettings settings, ValidateOptions validate, ConfigStore& store,
                  Listener listener, ConnectionObserver on_connection,
                  const Clock& clock = RealClock::Get());
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
  // The config `response` holds, or why it is refused (version, nonce, type, or the resources).
  absl::StatusOr<std::unique_ptr<Config>> Read(
      const envoy::service::discovery::v3::DiscoveryResponse& response) const;
  // Logs the end of a stream, once per outage and through stream_ends_.
  void LogStreamEnd(const grpc::Status& ended, bool delivered);
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
  bool outage_logged_ = false;  // the outage's line was logged: its end is too
  std::mt19937_64 random_;
  LogThrottle rejections_;
  LogThrottle acceptances_;
  LogThrottle stream_ends_;

  Mutex mu_;
  CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // of the stream running
  std::thread thread_;
};

}  // namespace sluice
