#include "server/process/part_options.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace sluice {
namespace {

size_t MibToBytes(int64_t mib) { return static_cast<size_t>(mib) << 20; }

}  // namespace

std::string FixedWindowsOnlyBackend(const BackendSettings& backend) {
  return backend.kind == BackendKind::kMemcached ? std::string(BackendKindName(backend.kind))
                                                 : std::string();
}

MemcachedBackendOptions MemcachedBackendOptionsFrom(const BackendSettings& backend,
                                                    const LimiterSettings& limiter) {
  const MemcachedSettings& memcached = backend.memcached;
  const RedisSettings& shared = backend.shared;
  MemcachedBackendOptions options;
  options.timeout = shared.timeout;
  options.key_prefix = limiter.key_prefix;
  MemcachedClientOptions& client = options.client;
  client.servers = memcached.servers;
  client.srv = memcached.srv;
  client.srv_refresh = memcached.srv_refresh;
  client.connections = memcached.connections;
  client.io_threads = shared.io_threads;
  client.queue_grace = shared.queue_grace;
  client.breaker_failures = shared.breaker_failures;
  client.breaker_open = shared.breaker_open;
  client.breaker_open_min = shared.breaker_open_min;
  client.tls.enabled = memcached.tls;
  client.tls.ca_file = memcached.tls_ca;
  client.tls.cert_file = memcached.tls_cert;
  client.tls.key_file = memcached.tls_key;
  client.tls.server_name = memcached.tls_server_name;
  client.tls.skip_hostname_verification = memcached.tls_skip_hostname_verification;
  return options;
}

ConfigLoadOptions ConfigLoadOptionsFrom(const ConfigSettings& config,
                                        const BackendSettings& backend) {
  ConfigLoadOptions options;
  options.fixed_windows_only = FixedWindowsOnlyBackend(backend);
  options.merge_domains = config.merge_domains;
  options.recursive = config.recursive;
  options.ignore_dot_files = config.ignore_dot_files;
  options.strict = config.strict;
  options.max_file_bytes = config.max_file_bytes;
  options.max_nodes = config.max_nodes;
  options.max_scalar_bytes = config.max_scalar_bytes;
  return options;
}

MemoryBackendOptions MemoryBackendOptionsFrom(const BackendSettings& backend) {
  MemoryBackendOptions options;
  options.max_keys = static_cast<size_t>(std::max<int64_t>(1, backend.memory_max_keys));
  options.max_bytes = MibToBytes(backend.memory_max_mib);
  return options;
}

RedisBackendOptions RedisBackendOptionsFrom(const RedisSettings& shared,
                                            const RedisTargetSettings& target, bool cluster,
                                            absl::string_view key_prefix, int replicas) {
  RedisBackendOptions options;
  options.cluster = cluster;
  if (!target.sentinels.empty()) {
    // The sentinels name the master; the client takes no address of its own then.
    options.client.sentinel.addresses = target.sentinels;
    options.client.sentinel.master = target.sentinel_master;
    options.client.sentinel.username = target.sentinel_username;
    options.client.sentinel.password = target.sentinel_password;
  } else {
    options.cluster_seeds = target.addresses;
    options.client.address = target.addresses.front();
  }
  options.client.username = target.username;
  options.client.password = target.password;
  options.client.db = shared.db;
  // One TLS setup for both Redis, used by each that turns TLS on (a Redis without it keeps
  // RedisTlsOptions' defaults, all off). A cluster's nodes each get it through
  // RedisClusterClientOptions::node, which RedisBackend fills from `client`.
  if (target.tls) {
    options.client.tls.enabled = true;
    options.client.tls.ca_file = shared.tls_ca;
    options.client.tls.cert_file = shared.tls_cert;
    options.client.tls.key_file = shared.tls_key;
    options.client.tls.server_name = shared.tls_server_name;
    options.client.tls.skip_hostname_verification = shared.tls_skip_hostname_verification;
  }
  options.client.io_threads = shared.io_threads;
  options.client.connections_per_thread = target.connections;
  if (!shared.caller_writes) {
    options.client.caller_write_horizon = absl::ZeroDuration();
  }
  options.client.breaker_failures = shared.breaker_failures;
  options.client.breaker_open = shared.breaker_open;
  options.client.breaker_open_min = shared.breaker_open_min;
  options.client.queue_grace = shared.queue_grace;
  options.timeout = shared.timeout;
  options.use_caller_clock = shared.clock == RedisClockSource::kLocal;
  options.max_batch = static_cast<size_t>(shared.max_batch);
  options.key_layout = shared.key_layout;
  options.key_prefix = std::string(key_prefix);
  options.expiration_jitter = shared.expiration_jitter;
  options.leases.hot_rate = shared.lease_rate;
  options.leases.window = shared.lease_window;
  options.leases.life = shared.lease_life;
  options.leases.max_share = shared.lease_max_share;
  options.leases.replicas = replicas;
  return options;
}

RateLimiterOptions RateLimiterOptionsFrom(const Settings& settings) {
  const LimiterSettings& limiter = settings.limiter;
  RateLimiterOptions options;
  options.max_descriptors = static_cast<size_t>(limiter.max_descriptors);
  options.max_entries = static_cast<size_t>(limiter.max_entries);
  options.max_key_bytes = static_cast<size_t>(limiter.max_key_bytes);
  options.key_prefix = limiter.key_prefix;
  options.failure_mode = limiter.failure_mode;
  options.replicas_hint = static_cast<uint32_t>(limiter.replicas_hint);
  const MemoryBackendOptions local = MemoryBackendOptionsFrom(settings.backend);
  options.local_max_keys = local.max_keys;
  options.local_max_bytes = local.max_bytes;
  options.respond.near_limit_ratio = limiter.near_limit_ratio;
  options.respond.global_shadow_mode = limiter.shadow_mode;
  options.respond.global_quota_mode = limiter.quota_mode;
  options.respond.response_dynamic_metadata = limiter.response_dynamic_metadata;
  options.respond.rate_limit_headers = limiter.rate_limit_headers;
  options.respond.limit_header = limiter.limit_header;
  options.respond.remaining_header = limiter.remaining_header;
  options.respond.reset_header = limiter.reset_header;
  options.respond.ietf_rate_limit_headers = limiter.ietf_rate_limit_headers;
  options.respond.retry_after_header = limiter.retry_after_header;
  options.calendar_months = limiter.calendar_months;
  options.respond.request_all_or_nothing = limiter.request_all_or_nothing;
  options.default_charge = limiter.count_denied_hits ? Charge::kAlways : limiter.default_charge;
  options.default_charge_fixed_window =
      limiter.count_denied_hits ? std::optional<Charge>(Charge::kAlways)
                                : limiter.default_charge_fixed_window;
  options.refuse_refunds = limiter.refuse_refunds;
  return options;
}

StatsdSinkOptions StatsdSinkOptionsFrom(const StatsdSettings& statsd) {
  StatsdSinkOptions options;
  options.address = statsd.address;
  options.protocol = statsd.protocol == StatsdSettings::Protocol::kTcp ? StatsdProtocol::kTcp
                                                                       : StatsdProtocol::kUdp;
  options.flush_interval = statsd.flush_interval;
  options.encoder.dogstatsd = statsd.dogstatsd;
  options.encoder.extra_tags = statsd.extra_tags;
  options.encoder.global_tags = statsd.dogstatsd_tags;
  for (const StatsdMogrifierSettings& m : statsd.mogrifiers) {
    options.mogrifiers.push_back(StatsdMogrifierRule{m.id, m.pattern, m.name, m.tags});
  }
  return options;
}

MetricsOptions MetricsOptionsFrom(const Settings& settings) {
  return MetricsOptions{
      .max_rule_series =
          static_cast<size_t>(std::max<int64_t>(1, settings.limiter.max_rule_metric_series)),
      .rule_series_ttl = settings.limiter.rule_metric_ttl,
      .max_page_bytes = static_cast<size_t>(settings.http.metrics_max_page_bytes)};
}

HttpServerOptions HttpServerOptionsFrom(const Settings& settings) {
  HttpServerOptions options;
  options.healthy_requires_config = settings.healthy_requires_config;
  options.request_timeout = settings.http.request_timeout;
  options.answer_timeout = settings.http.answer_timeout;
  options.config_dump_max_bytes = static_cast<size_t>(settings.http.config_dump_max_bytes);
  options.max_connections = static_cast<size_t>(settings.http.max_connections);
  return options;
}

GrpcTlsSettings GrpcTlsSettingsFrom(const GrpcSettings& grpc) {
  return {
      .cert_file = grpc.tls_cert,
      .key_file = grpc.tls_key,
      .client_ca_file = grpc.tls_client_ca,
      .client_san = grpc.tls_client_san,
      .reload_interval_seconds = static_cast<int>(absl::ToInt64Seconds(grpc.tls_reload_interval))};
}

OtlpExporterOptions OtlpExporterOptionsFrom(const TracingSettings& tracing) {
  OtlpExporterOptions options;
  options.endpoint = tracing.endpoint;
  if (options.endpoint.empty()) {
    options.endpoint = tracing.protocol == TracingProtocol::kGrpc
                           ? "http://localhost:4317"
                           : "http://localhost:4318/v1/traces";
  }
  options.insecure = tracing.insecure;
  options.headers = tracing.headers;
  options.timeout = tracing.timeout;
  options.ca_file = tracing.ca;
  options.resource.service_name = tracing.service_name;
  options.resource.service_namespace = tracing.service_namespace;
  options.resource.service_instance_id = tracing.service_instance_id;
  return options;
}

BatchSpanProcessorOptions BatchSpanProcessorOptionsFrom(const TracingSettings& tracing) {
  BatchSpanProcessorOptions options;
  options.max_queue_spans = static_cast<size_t>(tracing.max_queue_spans);
  options.max_export_spans = static_cast<size_t>(tracing.max_export_spans);
  options.export_interval = tracing.export_interval;
  return options;
}

TracerOptions TracerOptionsFrom(const TracingSettings& tracing) {
  TracerOptions options;
  options.sampling_ratio = tracing.sampling_rate;
  options.descriptor_values = tracing.descriptor_values;
  return options;
}

}  // namespace sluice
