#include "server/process/assembly.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "server/backend/memory_backend.h"
#include "server/backend/per_second_backend.h"
#include "server/common/flag_file.h"
#include "server/common/logging.h"
#include "server/common/status_macros.h"
#include "server/process/part_options.h"
#include "server/redis/sha1.h"
#include "server/service/grpc_options.h"
#include "server/service/admin_auth.h"
#include "server/service/grpc_tls.h"
#include "server/service/http_connections.h"
#include "server/stats/process_metrics.h"
#include "server/stats/prometheus_exposition.h"
#include "server/stats/upstream_stats.h"
#include "server/trace/otlp/otlp_grpc_exporter.h"
#include "server/trace/otlp/otlp_http_exporter.h"

namespace sluice {
namespace {

// A short digest of what the config says (its rules and their files and lines), the same on
// every replica that loaded the same files: sluice_config_info{version}.
std::string ConfigVersion(const Config& config) { return Sha1Hex(config.Dump()).substr(0, 12); }

// One Redis backend, connecting; `what` names it in errors and the log ("redis",
// "per-second redis_cluster").
absl::StatusOr<std::unique_ptr<RedisBackend>> StartRedis(const Settings& settings,
                                                         const RedisTargetSettings& target,
                                                         BackendKind kind, const Clock& clock,
                                                         const std::string& what) {
  auto created = RedisBackend::Create(
      RedisBackendOptionsFrom(settings.backend.shared, target, kind == BackendKind::kRedisCluster,
                              settings.limiter.key_prefix, settings.limiter.replicas_hint),
      clock);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat(what, ": ", created.status().message()));
  }
  // Serve even if Redis is not up yet: decisions follow --failure_mode until it is.
  if (!(*created)->WaitUntilReady(absl::Seconds(2))) {
    const std::string where =
        target.sentinels.empty()
            ? absl::StrJoin(target.addresses, ",")
            : absl::StrCat("master '", target.sentinel_master, "' of sentinels ",
                           absl::StrJoin(target.sentinels, ","));
    SLUICE_LOG(WARNING) << what << " at " << where
                        << " is not reachable yet; answering by --failure_mode="
                        << FailureModeName(settings.limiter.failure_mode)
                        << " (or the domain's failure_mode:) until it is";
  }
  return created;
}

// The process's file-descriptor limit (RLIMIT_NOFILE, soft); 0: unlimited or unknown.
uint64_t FileDescriptorLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) {
    return 0;
  }
  return static_cast<uint64_t>(files.rlim_cur);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Assembly>> Assembly::Create(const Settings& settings,
                                                           std::shared_ptr<const Config> config) {
  std::unique_ptr<Assembly> assembly(new Assembly(settings, std::move(config)));
  RETURN_IF_ERROR(assembly->BuildTracing());
  RETURN_IF_ERROR(assembly->BuildBackend());
  assembly->BuildLimiter();
  RETURN_IF_ERROR(assembly->BuildServers());
  RETURN_IF_ERROR(assembly->BuildStatsd());
  assembly->BuildReloads();
  return assembly;
}

Assembly::Assembly(const Settings& settings, std::shared_ptr<const Config> config)
    : settings_(settings),
      clock_(RealClock::Get()),
      metrics_(MetricsOptionsFrom(settings)),
      store_(config) {
  if (config != nullptr) {
    metrics_.ConfigInForce(config->RuleCount(), ConfigVersion(*config), absl::Now());
  }
}

absl::Status Assembly::BuildTracing() {
  const TracingSettings& tracing = settings_.tracing;
  if (!tracing.enabled) {
    return absl::OkStatus();
  }
  OtlpExporterOptions options = OtlpExporterOptionsFrom(tracing);
  if (options.resource.service_instance_id.empty()) {
    options.resource.service_instance_id = RandomUuid();
  }
  const std::string endpoint = options.endpoint;
  const std::string instance = options.resource.service_instance_id;
  std::unique_ptr<SpanExporter> exporter;
  if (tracing.protocol == TracingProtocol::kGrpc) {
    ASSIGN_OR_RETURN(exporter, OtlpGrpcExporter::Create(std::move(options)));
  } else {
    ASSIGN_OR_RETURN(exporter, OtlpHttpExporter::Create(std::move(options)));
  }
  span_processor_ = std::make_unique<BatchSpanProcessor>(std::move(exporter),
                                                         BatchSpanProcessorOptionsFrom(tracing));
  tracer_ = std::make_unique<Tracer>(*span_processor_, clock_, trace_ids_,
                                     TracerOptionsFrom(tracing));
  SLUICE_LOG(INFO) << "tracing: OTLP/" << TracingProtocolName(tracing.protocol) << " to "
                   << endpoint << ", sampling rate " << tracing.sampling_rate << ", service "
                   << tracing.service_name << " instance " << instance;
  return absl::OkStatus();
}

absl::Status Assembly::BuildBackend() {
  backend_started_ = absl::Now();
  const BackendSettings& backend = settings_.backend;
  if (backend.kind == BackendKind::kMemory) {
    backend_ = std::make_unique<MemoryBackend>(clock_, MemoryBackendOptionsFrom(backend));
    return absl::OkStatus();
  }
  if (backend.kind == BackendKind::kMemcached) {
    auto created = MemcachedBackend::Create(
        MemcachedBackendOptionsFrom(backend, settings_.limiter), clock_);
    if (!created.ok()) {
      return absl::Status(created.status().code(),
                          absl::StrCat("memcached: ", created.status().message()));
    }
    // Serve even if memcached is not up yet: decisions follow --failure_mode until it is.
    if (!(*created)->WaitUntilReady(absl::Seconds(2))) {
      SLUICE_LOG(WARNING) << "memcached at "
                          << absl::StrJoin((*created)->client().server_addresses(), ",")
                          << " is not all reachable yet; answering by --failure_mode="
                          << FailureModeName(settings_.limiter.failure_mode)
                          << " (or the domain's failure_mode:) for its keys until it is";
    }
    memcached_backend_ = created->get();
    backend_ = std::move(*created);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RedisBackend> main,
                   StartRedis(settings_, backend.redis, backend.kind, clock_,
                              std::string(BackendKindName(backend.kind))));
  redis_backends_.push_back(main.get());
  backend_ = std::move(main);
  if (backend.per_second_kind.has_value()) {
    const BackendKind kind = *backend.per_second_kind;
    ASSIGN_OR_RETURN(std::unique_ptr<RedisBackend> per_second,
                     StartRedis(settings_, backend.per_second, kind, clock_,
                                absl::StrCat("per-second ", BackendKindName(kind))));
    redis_backends_.push_back(per_second.get());
    backend_ = std::make_unique<PerSecondBackend>(std::move(backend_), std::move(per_second));
  }
  return absl::OkStatus();
}

void Assembly::BuildLimiter() {
  const LimiterSettings& limiter = settings_.limiter;
  // The memory backend is as fast as the cache: only a remote backend gets one.
  if ((!redis_backends_.empty() || memcached_backend_ != nullptr) &&
      limiter.over_limit_cache_keys > 0) {
    over_limit_cache_ = std::make_unique<OverLimitCache>(
        clock_, static_cast<size_t>(limiter.over_limit_cache_keys),
        static_cast<size_t>(limiter.over_limit_cache_max_mib) << 20);
  }
  limiter_ =
      std::make_unique<RateLimiter>(store_, *backend_, clock_, metrics_,
                                    RateLimiterOptionsFrom(settings_), over_limit_cache_.get());
}

absl::Status Assembly::BuildServers() {
  service_ = std::make_unique<RateLimitGrpcService>(
      *limiter_, &metrics_.RequestLatency(Transport::kGrpc), tracer_.get());
  if (settings_.grpc.rlqs) {
    quota::QuotaOptions quota_options;
    quota_options.max_streams = static_cast<size_t>(settings_.grpc.rlqs_max_streams);
    quota_options.max_buckets_per_stream =
        static_cast<size_t>(settings_.grpc.rlqs_max_buckets_per_stream);
    quota_options.max_subscriptions = static_cast<size_t>(settings_.grpc.rlqs_max_subscriptions);
    quota_options.failure_mode = settings_.limiter.failure_mode;
    quota_options.max_key_bytes = static_cast<size_t>(settings_.limiter.max_key_bytes);
    quota_options.max_pairs = static_cast<size_t>(settings_.limiter.max_entries);
    const GrpcSettings& grpc = settings_.grpc;
    quota_options.max_streams_per_peer = static_cast<size_t>(grpc.rlqs_max_streams_per_peer);
    quota_options.max_bytes = static_cast<size_t>(grpc.rlqs_max_mib) << 20;
    quota_options.max_peer_bytes = static_cast<size_t>(grpc.rlqs_max_peer_mib) << 20;
    quota_options.max_stream_bytes = static_cast<size_t>(grpc.rlqs_max_stream_mib) << 20;
    quota_options.page_values = grpc.rlqs_page_values;
    quota_options.newcomer_waits = grpc.rlqs_newcomer_waits;
    const absl::Duration interval = grpc.rlqs_rebalance_interval;
    quota_options.remote_stale_after_us = absl::ToInt64Microseconds(interval * 2.5);
    quota_options.rebalance_interval_us = absl::ToInt64Microseconds(interval);
    if (!redis_backends_.empty()) {
      // Replicas share their Envoys' demand through the main Redis; an entry outlives two
      // rebalances and a half, and a rebalance waits at most half an interval for it.
      quota_exchange_ = std::make_unique<RedisQuotaExchange>(
          *redis_backends_.front(), settings_.limiter.key_prefix, interval * 2.5,
          std::max(settings_.backend.shared.timeout, std::min(interval / 2, absl::Seconds(1))));
    }
    quota_ = std::make_unique<quota::QuotaServer>(store_, quota_options, quota_exchange_.get());
    RlqsServiceOptions service_options;
    service_options.rebalance_interval = interval;
    service_options.max_pending_bytes = static_cast<size_t>(grpc.rlqs_max_pending_kib) << 10;
    service_options.max_pending_total_bytes = static_cast<size_t>(grpc.rlqs_max_pending_mib) << 20;
    service_options.write_timeout = grpc.rlqs_write_timeout;
    rlqs_service_ = std::make_unique<RlqsGrpcService>(*quota_, service_options, tracer_.get());
  }
  grpc::EnableDefaultHealthCheckService(true);
  ASSIGN_OR_RETURN(credentials_, GrpcServerCredentials(GrpcTlsSettingsFrom(settings_.grpc)));
  HttpServerOptions http_options = HttpServerOptionsFrom(settings_);
  http_options.tracer = tracer_.get();
  http_options.quota = quota_.get();
  // A RateLimitRequest's only arrays are its descriptors and their entries.
  http_options.json_max_array_elements = static_cast<size_t>(
      std::max(settings_.limiter.max_descriptors, settings_.limiter.max_entries));
  const size_t requested = http_options.max_connections;
  const uint64_t fd_limit = FileDescriptorLimit();
  http_options.max_connections = HttpConnectionCap(requested, fd_limit);
  if (http_options.max_connections < requested) {
    SLUICE_LOG(WARNING) << "--http_max_connections=" << requested << " lowered to "
                        << http_options.max_connections << ", half of the " << fd_limit
                        << " file descriptors ulimit -n allows (raise it for more)";
  }
  RETURN_IF_ERROR(BuildAdmin(http_options));
  http_ = std::make_unique<HttpServer>(*limiter_, store_, *backend_, metrics_, http_options);
  if (settings_.wait_for_backend.enabled) {
    MutexLock lock(health_mu_);
    backend_answered_ = false;
    http_->SetWaitingForBackend(true);
  }
  return BuildPrometheus();
}

absl::Status Assembly::BuildPrometheus() {
  const PrometheusSettings& prometheus = settings_.prometheus;
  if (prometheus.address.empty()) {
    return absl::OkStatus();
  }
  // Each stat key has six names, and a few more are the service's: the mapper's cache holds
  // them all, so that a scrape maps each name once.
  const size_t names =
      6 * static_cast<size_t>(std::max<int64_t>(1, settings_.limiter.max_rule_metric_series)) +
      64;
  if (prometheus.mapper.empty()) {
    ASSIGN_OR_RETURN(prometheus_mapper_,
                     StatsdMapper::FromYaml(kBuiltinMappingName,
                                            BuiltinStatsdMapping(prometheus.response_time_ms),
                                            names));
  } else {
    absl::StatusOr<std::unique_ptr<StatsdMapper>> mapper =
        StatsdMapper::FromFile(prometheus.mapper, names);
    if (!mapper.ok()) {
      return absl::Status(mapper.status().code(),
                          absl::StrCat("--prometheus_mapper: ", mapper.status().message()));
    }
    prometheus_mapper_ = std::move(*mapper);
  }
  prometheus_ = std::make_unique<PrometheusListener>(
      prometheus.path,
      [this] {
        // Upstream's names, then the process series a Prometheus client library adds (Envoy
        // Gateway's dashboard plots the memory ones).
        return RenderUpstreamPage(*prometheus_mapper_, metrics_, ProcessMetricsText(),
                                  static_cast<size_t>(settings_.http.metrics_max_page_bytes));
      },
      settings_.http.answer_timeout);
  return absl::OkStatus();
}

absl::Status Assembly::BuildStatsd() {
  const StatsdSettings& statsd = settings_.statsd;
  if (statsd.address.empty()) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<StatsdSink>> sink =
      StatsdSink::Create(metrics_, StatsdSinkOptionsFrom(statsd));
  if (!sink.ok()) {
    return absl::Status(sink.status().code(),
                        absl::StrCat("--statsd_mogrifiers: ", sink.status().message()));
  }
  statsd_ = std::move(*sink);
  statsd_->Start();
  SLUICE_LOG(INFO) << "statsd: envoyproxy/ratelimit's names to " << statsd.address << " over "
                   << StatsdProtocolName(statsd.protocol) << " every "
                   << absl::FormatDuration(statsd.flush_interval)
                   << (statsd.dogstatsd ? " as DogStatsD" : "");
  return absl::OkStatus();
}

void Assembly::BuildReloads() {
  if (settings_.config.source == ConfigSourceKind::kXds) {
    xds_ = std::make_unique<XdsConfigClient>(
        settings_.config.xds,
        ValidateOptions{.merge_domains = settings_.config.merge_domains,
                        .strict = settings_.config.strict,
                        .fixed_windows_only = FixedWindowsOnlyBackend(settings_.backend)},
        store_,
        [this](const Config* accepted, const std::string&, const absl::Status& rejected) {
          OnXdsSnapshot(accepted, rejected);
        },
        [this](bool connected) { metrics_.XdsConnected(connected); });
    xds_->Start();
    return;
  }
  watcher_ = std::make_shared<ConfigWatcher>(
      settings_.config.path, ConfigLoadOptionsFrom(settings_.config, settings_.backend), store_,
      [this](bool ok, const Config* next) { OnReload(ok, next); });
  // Loads run on the reloader's thread; the slow half of one touches the watcher only, which
  // it shares, so it may outlive the assembly (StopReloads).
  reloader_ = std::make_unique<ConfigReloader>(
      [watcher = watcher_](bool force) { return watcher->Load(force); });
}

absl::Status Assembly::StartGrpc() {
  grpc::ServerBuilder builder;
  GrpcServerSettings grpc_settings;
  grpc_settings.max_connection_age = settings_.grpc.max_connection_age;
  grpc_settings.max_connection_age_grace = settings_.grpc.max_connection_age_grace;
  ApplyGrpcServerSettings(grpc_settings, builder);
  builder.AddListeningPort(settings_.grpc.address, credentials_, &grpc_port_);
  builder.RegisterService(service_.get());
  if (rlqs_service_ != nullptr) {
    builder.RegisterService(rlqs_service_.get());
  }
  grpc_server_ = builder.BuildAndStart();
  const bool unix_socket = absl::StartsWith(settings_.grpc.address, "unix");
  if (grpc_server_ == nullptr || (grpc_port_ == 0 && !unix_socket)) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on gRPC address ", settings_.grpc.address));
  }
  return absl::OkStatus();
}

absl::Status Assembly::StartHttp() {
  RETURN_IF_ERROR(http_->Start(settings_.http.address, settings_.http.debug_address,
                               settings_.http.debug_address_required));
  if (prometheus_ != nullptr) {
    RETURN_IF_ERROR(prometheus_->Start(settings_.prometheus.address));
  }
  return absl::OkStatus();
}

void Assembly::SetHealth(bool serving) {
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  health->SetServingStatus(serving);
  for (const char* name : {"ratelimit", "envoy.service.ratelimit.v3.RateLimitService"}) {
    health->SetServingStatus(name, serving);
  }
  if (rlqs_service_ != nullptr) {
    health->SetServingStatus("envoy.service.rate_limit_quota.v3.RateLimitQuotaService", serving);
  }
}

void Assembly::DrainQuota() {
  if (rlqs_service_ != nullptr) {
    rlqs_service_->Drain();
  }
}

bool Assembly::ConfigHealthy() const { return HealthyWith(store_.Get().get()); }

bool Assembly::HealthyWith(const Config* config) const {
  return !settings_.healthy_requires_config || (config != nullptr && !config->domains().empty());
}

std::string Assembly::ServingSummary() const {
  const bool unix_socket = absl::StartsWith(settings_.grpc.address, "unix");
  const std::shared_ptr<const Config> config = store_.Get();
  return absl::StrCat(
      "gRPC on ", unix_socket ? settings_.grpc.address : absl::StrCat("port ", grpc_port_),
      ", HTTP on port ", http_->port(),
      http_->debug_port() != 0 ? absl::StrCat(" and ", http_->debug_port()) : "",
      prometheus_ != nullptr
          ? absl::StrCat(", Prometheus (upstream's names) on port ", prometheus_->port(),
                         settings_.prometheus.path)
          : "",
      ", backend ",
      backend_->Name(), ", ", config != nullptr ? config->RuleCount() : 0, " rules",
      settings_.grpc.max_connection_age > absl::ZeroDuration()
          ? absl::StrCat(", gRPC connections sent GOAWAY at ",
                         absl::FormatDuration(settings_.grpc.max_connection_age),
                         " of age (+/-10%)")
          : "");
}

void Assembly::RequestReload(bool force) {
  if (reloader_ != nullptr) {
    reloader_->Request(force);
  }
}

bool Assembly::NeedsFirstConfig() const {
  return xds_ != nullptr && !settings_.config.force_start_without_initial_config;
}

bool Assembly::WaitForConfig(absl::Duration timeout) {
  return xds_ == nullptr || xds_->WaitForConfig(timeout);
}

bool Assembly::StopReloads() {
  bool stopped = true;
  if (xds_ != nullptr) {
    xds_->Stop();  // quick: cancels the stream
  } else {
    stopped = reloader_->Stop();
  }
  MutexLock lock(health_mu_);
  health_follows_config_ = false;
  return stopped;
}

void Assembly::FollowConfigHealth() {
  MutexLock lock(health_mu_);
  health_follows_config_ = true;
  SetHealth(backend_answered_ && ConfigHealthy());
}

void Assembly::BackendAnswered() {
  MutexLock lock(health_mu_);
  if (backend_answered_) {
    return;
  }
  backend_answered_ = true;
  http_->SetWaitingForBackend(false);
  if (health_follows_config_) {
    SetHealth(ConfigHealthy());
  }
}

void Assembly::OnXdsSnapshot(const Config* accepted, const absl::Status& rejected) {
  metrics_.CountXdsSnapshot(rejected.ok());
  OnReload(rejected.ok(), accepted);
}

void Assembly::OnReload(bool ok, const Config* next) {
  metrics_.CountConfigReload(ok);
  if (next != nullptr) {
    metrics_.ConfigInForce(next->RuleCount(), ConfigVersion(*next), absl::Now());
    MutexLock lock(health_mu_);
    if (health_follows_config_) {
      SetHealth(backend_answered_ && HealthyWith(next));
    }
  }
}

// ---- The admin API and the reset log.

absl::Status Assembly::BuildAdmin(HttpServerOptions& http_options) {
  // Every replica with a cache follows the log, whether or not it serves the admin API: a reset
  // may come through any replica.
  if (over_limit_cache_ != nullptr && backend_->SharesResets()) {
    reset_follower_ = std::make_unique<ResetFollower>(*backend_, *over_limit_cache_);
    reset_follower_->Start();
    http_options.reset_follower = reset_follower_.get();
  }
  if (!settings_.admin.enabled) {
    return absl::OkStatus();
  }
  if (!settings_.admin.token_file.empty()) {
    ASSIGN_OR_RETURN(http_options.admin_token, ReadSecretFile("admin_token_file", settings_.admin.token_file));
  }
  // Resolved as the decision path resolves (RateLimiter's options), so the keys are the same.
  const RateLimiterOptions limiter = RateLimiterOptionsFrom(settings_);
  AdminServiceOptions options;
  options.limits = {limiter.max_descriptors, limiter.max_entries, limiter.max_key_bytes};
  options.resolve = ResolveOptionsOf(limiter);
  admin_ = std::make_unique<AdminService>(store_, *backend_, over_limit_cache_.get(), options);
  http_options.admin = admin_.get();
  SLUICE_LOG(INFO) << "admin API on (POST /admin/inspect, /admin/reset), "
                   << (http_options.admin_token.empty()
                           ? "without a token: HTTP on loopback only"
                           : "bearer token from --admin_token_file");
  return absl::OkStatus();
}

void Assembly::StopResetFollower() {
  if (reset_follower_ != nullptr) {
    reset_follower_->Stop();
  }
}

}  // namespace sluice
