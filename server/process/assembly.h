// The server's parts, built from Settings and owned together: metrics, the config store, the
// backend (memory; or Redis, with a per-second Redis behind a PerSecondBackend), the over-limit
// cache, the rate limiter, the gRPC service and server, the HTTP server, the tracer and its
// OTLP exporter (with --tracing), envoyproxy/ratelimit's
// Prometheus listener (with --prometheus_address), its statsd sink (with --statsd_address), and
// the config watcher with its reloader
// (or, with --config_source=xds, the xDS client). This is the one place that builds the real
// object graph (server/main.cc reaches it through RunProcess); every part receives its
// collaborators through its constructor. The members are declared in the order they are built, so each part is destroyed
// before what it uses.
//
// When things happen (listening, reloads, the drain) is the lifecycle's (lifecycle.h); the
// assembly gives it the operations it needs. Not thread-safe: the main thread calls it. The
// reload listener (metrics, health) runs on the reloader's thread, or the xDS client's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "server/backend/backend.h"
#include "server/backend/memcached_backend.h"
#include "server/backend/redis_backend.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"
#include "server/config/config.h"
#include "server/config/config_reloader.h"
#include "server/config/config_store.h"
#include "server/config/config_watcher.h"
#include "server/quota/quota_server.h"
#include "server/service/admin_service.h"
#include "server/service/grpc_service.h"
#include "server/service/rlqs_exchange.h"
#include "server/service/rlqs_service.h"
#include "server/service/http_server.h"
#include "server/service/metrics.h"
#include "server/service/over_limit_cache.h"
#include "server/service/rate_limiter.h"
#include "server/service/reset_follower.h"
#include "server/settings/settings.h"
#include "server/stats/prometheus_listener.h"
#include "server/stats/statsd_mapper.h"
#include "server/stats/statsd_sink.h"
#include "server/xds/xds_config_client.h"
#include "server/trace/otlp/batch_span_processor.h"
#include "server/trace/tracer.h"

namespace sluice {

class Assembly {
 public:
  // Builds every part, with `config` in force (null: none yet, as
  // --force_start_without_initial_config allows). A Redis backend starts connecting and is
  // given 2 s to be ready; one that is not is logged, and its decisions follow the failure mode
  // until it is. Binds nothing (StartGrpc, StartHttp). Errors, naming what failed: a Redis
  // backend that cannot be created, TLS files that cannot be read, a --prometheus_mapper file
  // that cannot be read or is refused (file, line and field).
  // REQUIRES: ValidateSettings(settings) is empty; the process's signals are taken
  // (TakeProcessSignals), since parts start threads.
  static absl::StatusOr<std::unique_ptr<Assembly>> Create(const Settings& settings,
                                                          std::shared_ptr<const Config> config);

  ~Assembly() = default;
  Assembly(const Assembly&) = delete;
  Assembly& operator=(const Assembly&) = delete;

  // Starts the gRPC server on --grpc_address; kUnavailable "cannot listen on gRPC address ..."
  // if it cannot. REQUIRES: once.
  absl::Status StartGrpc();
  // Binds --http_address (and --debug_address, optional unless --debug_address_required) and
  // starts the HTTP thread, then --prometheus_address if given; errors name the flag.
  // REQUIRES: once.
  absl::Status StartHttp();

  // gRPC health for the whole server (""), "ratelimit" (what envoyproxy/ratelimit registers),
  // the RLS service's full name and, with --rlqs, the RLQS service's. REQUIRES: StartGrpc
  // succeeded.
  void SetHealth(bool serving);
  // Sets health as the config in force calls for (ConfigHealthy), and from then on after each
  // config put in force, until StopReloads. Before it, a config put in force (by the xDS
  // client, which may run ahead of StartGrpc) leaves health alone. REQUIRES: StartGrpc
  // succeeded.
  void FollowConfigHealth();
  // What health the config in force calls for: serving, unless
  // --healthy_with_at_least_one_config_loaded and it has no domain.
  bool ConfigHealthy() const;

  // --wait_for_backend: until BackendAnswered, gRPC health stays NOT_SERVING and /healthcheck
  // answers 500 whatever the config says; calls are answered meanwhile (by the failure policy
  // while the backend cannot decide). Without it, the backend is taken as answered from the
  // start.
  // Whether every backend can decide now (a Redis: a connection is up; memory: always). Any
  // thread.
  bool BackendReady() const { return backend_->Ready(); }
  // "redis", "redis_cluster" or "memory" (with a per-second Redis, the main one's name).
  absl::string_view backend_name() const { return backend_->Name(); }
  // When the backends began connecting: what --wait_for_backend_max_elapsed counts from.
  absl::Time backend_started() const { return backend_started_; }
  // The backend has answered once: health follows the config alone from now on (the failure
  // policy, not health, answers for a backend away later). Idempotent.
  void BackendAnswered();
  // "gRPC on port 8081, HTTP on port 8080, backend redis, 12 rules": what the start logs.
  std::string ServingSummary() const;

  // Asks for a config reload (ConfigReloader::Request); nothing with --config_source=xds,
  // whose server pushes changes. Returns at once.
  void RequestReload(bool force);
  // With --config_source=xds and without --force_start_without_initial_config: nothing is to
  // be served before the management server's first valid snapshot (as upstream).
  bool NeedsFirstConfig() const;
  // Waits up to `timeout` for the xDS client's first accepted snapshot; true at once for files.
  bool WaitForConfig(absl::Duration timeout);
  // No reload is applied from here on, and reloads no longer touch health. True if no load was
  // running; false if one was left to finish on its own (ConfigReloader::Stop).
  bool StopReloads();

  HttpServer& http() { return *http_; }
  // Stops reading the reset log (before the backends stop, in the drain). Idempotent.
  void StopResetFollower();
  // With --rlqs: stops rebalancing and ends every quota stream (their assignments left in force
  // in the Envoys) before the gRPC server drains. Nothing otherwise.
  void DrainQuota();
  // REQUIRES: StartGrpc succeeded.
  grpc::Server& grpc_server() { return *grpc_server_; }
  // The Redis backends (none with the memory backend), to stop before the HTTP server.
  const std::vector<RedisBackend*>& redis_backends() const { return redis_backends_; }
  // The memcached backend (null unless --backend=memcached), to stop before the HTTP server.
  MemcachedBackend* memcached_backend() const { return memcached_backend_; }

 private:
  Assembly(const Settings& settings, std::shared_ptr<const Config> config);

  // With --tracing: the exporter (the collector is not contacted yet), the batch processor and
  // the tracer. Errors name what failed (a CA file that cannot be read, a header refused).
  absl::Status BuildTracing();
  absl::Status BuildBackend();
  void BuildLimiter();
  // The reset log's follower (when the cache and the log exist) and, with --admin_api, the
  // admin API and its token, into `http_options`. Errors name --admin_token_file.
  absl::Status BuildAdmin(HttpServerOptions& http_options);
  absl::Status BuildServers();
  // The mapping and the listener of --prometheus_address, when given.
  absl::Status BuildPrometheus();
  // With --statsd_address: the statsd sink, started (it binds nothing). Errors name
  // --statsd_mogrifiers.
  absl::Status BuildStatsd();
  void BuildReloads();
  // The reload listener: metrics, and health unless draining.
  void OnReload(bool ok, const Config* next);
  // The xDS client's listener: OnReload, and the snapshot counters.
  void OnXdsSnapshot(const Config* accepted, const absl::Status& rejected);
  bool HealthyWith(const Config* config) const;

  const Settings settings_;
  const Clock& clock_;
  Metrics metrics_;
  ConfigStore store_;
  // With --tracing. The processor outlives everything that makes spans; destroyed last of them,
  // it exports what is queued within a short grace.
  std::unique_ptr<BatchSpanProcessor> span_processor_;
  RandomIdGenerator trace_ids_;
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<Backend> backend_;
  std::vector<RedisBackend*> redis_backends_;         // owned by backend_
  MemcachedBackend* memcached_backend_ = nullptr;     // owned by backend_
  std::unique_ptr<OverLimitCache> over_limit_cache_;  // only in front of Redis or memcached
  std::unique_ptr<RateLimiter> limiter_;
  // With an over-limit cache in front of a store that keeps a reset log (Redis): the reader
  // that makes this replica forget the entries of keys reset through other replicas.
  std::unique_ptr<ResetFollower> reset_follower_;
  // With --admin_api: POST /admin/inspect and /admin/reset.
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<RateLimitGrpcService> service_;
  // With --rlqs: the exchange of demand with other replicas (a Redis backend only), the
  // replica's quota streams, and their gRPC service (destroyed first).
  std::unique_ptr<RedisQuotaExchange> quota_exchange_;
  std::unique_ptr<quota::QuotaServer> quota_;
  std::unique_ptr<RlqsGrpcService> rlqs_service_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  int grpc_port_ = 0;  // the port bound (0 for a unix socket)
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HttpServer> http_;
  // With --prometheus_address: upstream's names, mapped by the mapping file or the built-in one.
  std::unique_ptr<StatsdMapper> prometheus_mapper_;
  std::unique_ptr<PrometheusListener> prometheus_;
  // With --statsd_address: upstream's statsd names, sent from a thread of its own. Destroyed
  // before the servers, after their drain: its last flush sends the drain's counts.
  std::unique_ptr<StatsdSink> statsd_;
  // When BuildBackend began.
  absl::Time backend_started_;
  // Whether config changes set health: from FollowConfigHealth until StopReloads.
  Mutex health_mu_;
  bool health_follows_config_ ABSL_GUARDED_BY(health_mu_) = false;
  // False from the start with --wait_for_backend, until BackendAnswered: health is NOT_SERVING.
  bool backend_answered_ ABSL_GUARDED_BY(health_mu_) = true;
  // Shared with a load that StopReloads left running.
  std::shared_ptr<ConfigWatcher> watcher_;
  std::unique_ptr<ConfigReloader> reloader_;
  // Instead of the watcher and the reloader, with --config_source=xds.
  std::unique_ptr<XdsConfigClient> xds_;
};

}  // namespace sluice
