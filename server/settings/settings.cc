#include "server/settings/settings.h"

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/settings/listen_address.h"

namespace sluice {
namespace {

// Collects the errors of one validation, in the order they are found.
class Errors {
 public:
  // Records `message` about `flags` (the one at fault first) unless `ok`.
  void Check(bool ok, std::initializer_list<absl::string_view> flags, std::string message) {
    if (ok) {
      return;
    }
    SettingError error;
    for (absl::string_view flag : flags) {
      error.flags.emplace_back(flag);
    }
    error.message = std::move(message);
    errors_.push_back(std::move(error));
  }
  // "--<flag> must be at least 1" unless `value` is.
  void AtLeastOne(absl::string_view flag, int64_t value) {
    Check(value >= 1, {flag}, absl::StrCat("--", flag, " must be at least 1"));
  }
  // "--<flag> must be at most <limit_text>" unless `value` <= `limit`.
  void AtMost(absl::string_view flag, int64_t value, int64_t limit, absl::string_view limit_text) {
    Check(value <= limit, {flag}, absl::StrCat("--", flag, " must be at most ", limit_text));
  }
  // "--<flag>: <value> is not between 1 and kMaxMib (MiB)" unless it is.
  void Mib(absl::string_view flag, int64_t value) {
    Check(value >= 1 && value <= kMaxMib, {flag},
          absl::StrCat("--", flag, ": ", value, " is not between 1 and ", kMaxMib, " (MiB)"));
  }

  std::vector<SettingError> Take() { return std::move(errors_); }

 private:
  std::vector<SettingError> errors_;
};

void CheckXds(const XdsSettings& xds, Errors& errors) {
  errors.Check(!xds.server.empty(), {"xds_server"},
               "--xds_server is required with --config_source=xds (HOST:PORT)");
  errors.Check(!xds.node_id.empty(), {"xds_node_id"}, "--xds_node_id must not be empty");
  errors.Check(xds.tls_cert.empty() == xds.tls_key.empty(), {"xds_tls_cert", "xds_tls_key"},
               "--xds_tls_cert and --xds_tls_key go together (mutual TLS to the xDS server)");
  errors.Check(xds.tls || (xds.tls_cert.empty() && xds.tls_ca.empty() &&
                           xds.tls_server_name.empty()),
               {"xds_tls"},
               "--xds_tls_cert, --xds_tls_key, --xds_tls_ca and --xds_tls_server_name need "
               "--xds_tls");
  errors.Check(xds.connect_retry_interval > absl::ZeroDuration(), {"xds_connect_retry_interval"},
               "--xds_connect_retry_interval must be positive");
  errors.Check(xds.backoff_initial > absl::ZeroDuration(), {"xds_backoff_initial"},
               "--xds_backoff_initial must be positive");
  errors.Check(xds.backoff_max >= xds.backoff_initial, {"xds_backoff_max", "xds_backoff_initial"},
               "--xds_backoff_max must be at least --xds_backoff_initial");
  errors.Check(xds.backoff_random_factor >= 0 && xds.backoff_random_factor <= 1,
               {"xds_backoff_random_factor"},
               absl::StrCat("--xds_backoff_random_factor: ", xds.backoff_random_factor,
                            " is not between 0 and 1"));
  errors.Check(xds.max_message_bytes >= 0 && xds.max_message_bytes <= INT32_MAX,
               {"xds_max_message_bytes"},
               absl::StrCat("--xds_max_message_bytes: ", xds.max_message_bytes,
                            " is not between 0 (gRPC's default) and ", INT32_MAX));
}

void CheckConfig(const ConfigSettings& config, Errors& errors) {
  if (config.source == ConfigSourceKind::kXds) {
    CheckXds(config.xds, errors);
  } else {
    // With --default_config given, the only reason it did not stand in for --config is
    // upstream's environment (flag_layers.h).
    errors.Check(!config.path.empty(), {"config"},
                 absl::StrCat("--config is required (a YAML file or a directory of them; or "
                              "envoyproxy/ratelimit's RUNTIME_ROOT and friends; or "
                              "--config_source=xds)",
                              config.default_path.empty()
                                  ? ""
                                  : absl::StrCat("; --default_config=", config.default_path,
                                                 " is not used under envoyproxy/ratelimit's "
                                                 "variables, which name no rules here")));
  }
  errors.AtLeastOne("config_max_file_bytes", config.max_file_bytes);
  errors.AtLeastOne("config_max_nodes", config.max_nodes);
  errors.AtLeastOne("config_max_scalar_bytes", config.max_scalar_bytes);
}

void CheckLimiter(const LimiterSettings& limiter, Errors& errors) {
  errors.AtLeastOne("replicas_hint", limiter.replicas_hint);
  errors.AtLeastOne("max_descriptors", limiter.max_descriptors);
  errors.AtLeastOne("max_entries", limiter.max_entries);
  errors.AtLeastOne("max_key_bytes", limiter.max_key_bytes);
  errors.Check(limiter.rule_metric_ttl >= absl::ZeroDuration(), {"rule_metric_ttl"},
               "--rule_metric_ttl must not be negative (0: never drop a series)");
  errors.Mib("over_limit_cache_max_mib", limiter.over_limit_cache_max_mib);
  const double ratio = limiter.near_limit_ratio;
  errors.Check(ratio >= 0 && ratio <= 1, {"near_limit_ratio"},
               absl::StrCat("--near_limit_ratio: ", ratio, " is not between 0 and 1"));
}

void CheckListeners(const Settings& settings, Errors& errors) {
  const absl::Status grpc_address = ValidateGrpcListenAddress(settings.grpc.address);
  errors.Check(grpc_address.ok(), {"grpc_address"},
               absl::StrCat("--grpc_address: ", grpc_address.message()));
  const GrpcSettings& grpc = settings.grpc;
  errors.Check(grpc.tls_cert.empty() == grpc.tls_key.empty(), {"tls_cert", "tls_key"},
               "--tls_cert and --tls_key go together: give both or neither");
  errors.Check(!grpc.tls_cert.empty() || grpc.tls_client_ca.empty(), {"tls_client_ca"},
               "--tls_client_ca needs --tls_cert and --tls_key");
  errors.Check(grpc.tls_client_san.empty() || !grpc.tls_client_ca.empty(), {"tls_client_san"},
               "--tls_client_san needs --tls_client_ca (mutual TLS)");
  // In whole seconds, as the certificate watcher takes it.
  errors.Check(grpc.tls_cert.empty() || absl::ToInt64Seconds(grpc.tls_reload_interval) >= 1,
               {"tls_reload_interval"}, "--tls_reload_interval must be at least 1s");
  errors.Check(grpc.rlqs_rebalance_interval >= absl::Milliseconds(100),
               {"rlqs_rebalance_interval"}, "--rlqs_rebalance_interval must be at least 100ms");
  errors.AtLeastOne("rlqs_max_streams", grpc.rlqs_max_streams);
  errors.AtLeastOne("rlqs_max_buckets_per_stream", grpc.rlqs_max_buckets_per_stream);
  errors.AtLeastOne("rlqs_max_subscriptions", grpc.rlqs_max_subscriptions);
  errors.AtLeastOne("rlqs_max_streams_per_peer", grpc.rlqs_max_streams_per_peer);
  errors.AtLeastOne("rlqs_max_mib", grpc.rlqs_max_mib);
  errors.AtLeastOne("rlqs_max_peer_mib", grpc.rlqs_max_peer_mib);
  errors.AtLeastOne("rlqs_max_stream_mib", grpc.rlqs_max_stream_mib);
  errors.Check(grpc.rlqs_max_pending_kib >= 64, {"rlqs_max_pending_kib"},
               "--rlqs_max_pending_kib must be at least 64");
  errors.AtLeastOne("rlqs_max_pending_mib", grpc.rlqs_max_pending_mib);
  errors.Check(grpc.rlqs_write_timeout >= absl::Seconds(1), {"rlqs_write_timeout"},
               "--rlqs_write_timeout must be at least 1s");
  errors.AtMost("rlqs_max_mib", grpc.rlqs_max_mib, int64_t{1} << 30, "2^30 MiB");
  errors.AtMost("rlqs_max_peer_mib", grpc.rlqs_max_peer_mib, int64_t{1} << 30, "2^30 MiB");
  errors.AtMost("rlqs_max_stream_mib", grpc.rlqs_max_stream_mib, int64_t{1} << 30, "2^30 MiB");
  errors.AtMost("rlqs_max_pending_kib", grpc.rlqs_max_pending_kib, int64_t{1} << 40, "2^40 KiB");
  errors.AtMost("rlqs_max_pending_mib", grpc.rlqs_max_pending_mib, int64_t{1} << 30, "2^30 MiB");
  errors.Check(grpc.max_connection_age >= absl::ZeroDuration(), {"grpc_max_connection_age"},
               "--grpc_max_connection_age must not be negative (0: connections never age out)");
  errors.Check(grpc.max_connection_age_grace >= absl::ZeroDuration(),
               {"grpc_max_connection_age_grace"},
               "--grpc_max_connection_age_grace must not be negative (0: no limit)");
  errors.AtLeastOne("http_max_connections", settings.http.max_connections);
  errors.Check(settings.http.request_timeout >= absl::Milliseconds(1), {"http_request_timeout"},
               "--http_request_timeout must be at least 1ms");
  errors.Check(settings.http.answer_timeout >= absl::Milliseconds(1), {"http_answer_timeout"},
               "--http_answer_timeout must be at least 1ms");
  errors.AtLeastOne("config_dump_max_bytes", settings.http.config_dump_max_bytes);
  errors.Check(settings.http.metrics_max_page_bytes >= kMinMetricsPageBytes,
               {"metrics_max_page_bytes"},
               absl::StrCat("--metrics_max_page_bytes must be at least ", kMinMetricsPageBytes,
                            " (64 KiB), to hold the metrics that are not per rule"));
}

void CheckBackendWait(const BackendWaitSettings& wait, Errors& errors) {
  errors.Check(wait.initial_interval > absl::ZeroDuration(),
               {"wait_for_backend_initial_interval"},
               "--wait_for_backend_initial_interval must be positive");
  errors.Check(wait.max_interval > absl::ZeroDuration(), {"wait_for_backend_max_interval"},
               "--wait_for_backend_max_interval must be positive");
  errors.Check(wait.max_elapsed >= absl::ZeroDuration(), {"wait_for_backend_max_elapsed"},
               "--wait_for_backend_max_elapsed must not be negative (0: wait forever)");
}

void CheckPrometheus(const PrometheusSettings& prometheus, Errors& errors) {
  if (prometheus.address.empty()) {
    return;
  }
  const absl::Status address = ValidateHostPort(prometheus.address, 0);
  errors.Check(address.ok(), {"prometheus_address"},
               absl::StrCat("--prometheus_address: ", address.message()));
  errors.Check(absl::StartsWith(prometheus.path, "/"), {"prometheus_path"},
               absl::StrCat("--prometheus_path: '", prometheus.path, "' does not start with '/'"));
}

void CheckStatsd(const StatsdSettings& statsd, Errors& errors) {
  if (statsd.address.empty()) {
    return;
  }
  const absl::Status address = ValidateHostPort(statsd.address, 1);
  errors.Check(address.ok(), {"statsd_address"},
               absl::StrCat("--statsd_address: ", address.message()));
  errors.Check(statsd.flush_interval >= absl::Milliseconds(1), {"statsd_flush_interval"},
               "--statsd_flush_interval must be at least 1ms");
  errors.Check(statsd.dogstatsd || statsd.mogrifiers.empty(), {"statsd_mogrifiers"},
               "--statsd_mogrifiers needs --statsd_dogstatsd (plain statsd has no tags)");
  errors.Check(statsd.dogstatsd || statsd.dogstatsd_tags.empty(), {"statsd_dogstatsd_tags"},
               "--statsd_dogstatsd_tags needs --statsd_dogstatsd");
}

// The Sentinel flags of one Redis: each set only with the sentinels, which need the master's
// name, serve a standalone Redis only, and are each HOST:PORT.
void CheckRedisSentinel(const RedisTargetSettings& target, bool cluster, absl::string_view prefix,
                        absl::string_view backend, Errors& errors) {
  const std::string sentinels = absl::StrCat(prefix, "sentinels");
  const std::string master = absl::StrCat(prefix, "sentinel_master");
  const std::string username = absl::StrCat(prefix, "sentinel_username");
  const std::string password = absl::StrCat(prefix, "sentinel_password");
  const bool sentinel = !target.sentinels.empty();
  errors.Check(sentinel == !target.sentinel_master.empty(),
               {sentinel ? master : sentinels, sentinel ? sentinels : master},
               absl::StrCat("--", sentinels, " and --", master,
                            " go together: the sentinels, and the name they know the master by"));
  if (!sentinel) {
    // Credentials for sentinels that are not there are a mistake to see, not to ignore.
    errors.Check(target.sentinel_username.empty(), {username, sentinels},
                 absl::StrCat("--", username, " needs --", sentinels));
    errors.Check(target.sentinel_password.empty(), {password, sentinels},
                 absl::StrCat("--", password, " needs --", sentinels));
    return;
  }
  errors.Check(!cluster, {sentinels, backend},
               absl::StrCat("--", sentinels, ": Redis Sentinel serves a standalone Redis (--",
                            backend, "=redis), not redis_cluster"));
  for (const std::string& address : target.sentinels) {
    const absl::Status valid =
        absl::StartsWith(address, "unix:")
            ? absl::InvalidArgumentError(absl::StrCat(
                  "'", address, "' is a unix socket; sentinels are reached over TCP"))
            : ValidateHostPort(address, 1);
    errors.Check(valid.ok(), {sentinels},
                 absl::StrCat("--", sentinels, ": ", valid.message(),
                              " (each sentinel is HOST:PORT)"));
  }
  errors.Check(target.sentinel_username.empty() || !target.sentinel_password.empty(),
               {username, password}, absl::StrCat("--", username, " needs --", password));
}

// The flags of one Redis, by the prefix of their names ("redis_" or "redis_per_second_");
// `backend` is the flag that chose its kind.
void CheckRedisTarget(const RedisTargetSettings& target, bool cluster, absl::string_view prefix,
                      absl::string_view backend, Errors& errors) {
  const std::string addresses = absl::StrCat(prefix, "addresses");
  // With Sentinel the sentinels name the master; the addresses are not used.
  const bool sentinel = !target.sentinels.empty();
  errors.Check(sentinel || !target.addresses.empty(), {addresses},
               absl::StrCat("--", addresses, ": no address"));
  errors.Check(sentinel || cluster || target.addresses.size() <= 1, {addresses},
               absl::StrCat("--", addresses,
                            ": a standalone Redis takes one HOST:PORT "
                            "(redis_cluster takes several seed nodes)"));
  const std::string connections = absl::StrCat(prefix, "connections");
  errors.AtLeastOne(connections, target.connections);
  const std::string username = absl::StrCat(prefix, "username");
  const std::string password = absl::StrCat(prefix, "password");
  errors.Check(target.username.empty() || !target.password.empty(), {username, password},
               absl::StrCat("--", username, " needs --", password));
  if (target.tls && !sentinel) {
    // Redis serves TLS on its tls-port only; a unix socket is always plaintext.
    const std::string tls = absl::StrCat(prefix, "tls");
    for (const std::string& address : target.addresses) {
      errors.Check(!absl::StartsWith(address, "unix:"), {tls, addresses},
                   absl::StrCat("--", tls, ": '", address, "' in --", addresses,
                                " is a unix socket; TLS to Redis is over TCP (HOST:PORT)"));
    }
  }
  CheckRedisSentinel(target, cluster, prefix, backend, errors);
}

// The TLS setup both Redis share: it is used only by a Redis that has TLS on.
void CheckRedisTls(const BackendSettings& backend, Errors& errors) {
  const RedisSettings& redis = backend.shared;
  errors.Check(redis.tls_cert.empty() == redis.tls_key.empty(),
               {"redis_tls_cert", "redis_tls_key"},
               "--redis_tls_cert and --redis_tls_key go together (mutual TLS to Redis)");
  if (backend.redis.tls || backend.per_second.tls) {
    return;
  }
  // Each one set names itself: a file given for TLS that nothing speaks is a mistake to see.
  const std::pair<absl::string_view, bool> set[] = {
      {"redis_tls_ca", !redis.tls_ca.empty()},
      {"redis_tls_cert", !redis.tls_cert.empty()},
      {"redis_tls_key", !redis.tls_key.empty()},
      {"redis_tls_server_name", !redis.tls_server_name.empty()},
      {"redis_tls_skip_hostname_verification", redis.tls_skip_hostname_verification},
  };
  for (const auto& [flag, is_set] : set) {
    errors.Check(!is_set, {flag, "redis_tls", "redis_per_second_tls"},
                 absl::StrCat("--", flag, " needs --redis_tls or --redis_per_second_tls"));
  }
}

// Why `endpoint` is not one `protocol` can export to; empty when it is. http: the traces URL,
// http[s]://HOST[:PORT][/PATH]; grpc: http[s]://HOST:PORT[/] or HOST:PORT (a gRPC target has
// no path, so an http endpoint given to grpc is refused here rather than at the first export).
std::string TracingEndpointProblem(TracingProtocol protocol, absl::string_view endpoint) {
  absl::string_view rest = endpoint;
  const bool scheme =
      absl::ConsumePrefix(&rest, "http://") || absl::ConsumePrefix(&rest, "https://");
  if (protocol == TracingProtocol::kHttp) {
    if (scheme && !rest.empty() && rest.front() != '/') {
      return "";
    }
    return absl::StrCat("'", endpoint,
                        "' is not an http:// or https:// URL (--tracing_protocol=http takes the "
                        "traces URL, e.g. http://collector:4318/v1/traces)");
  }
  if (scheme) {
    absl::ConsumeSuffix(&rest, "/");
  }
  if (ValidateHostPort(rest, 1).ok()) {
    return "";
  }
  return absl::StrCat("'", endpoint,
                      "' is not http[s]://HOST:PORT or HOST:PORT (--tracing_protocol=grpc)");
}

// The tracing settings, read only with --tracing on (given while it is off, they are unused).
void CheckTracing(const TracingSettings& tracing, Errors& errors) {
  if (!tracing.enabled) {
    return;
  }
  if (!tracing.endpoint.empty()) {
    const std::string problem = TracingEndpointProblem(tracing.protocol, tracing.endpoint);
    errors.Check(problem.empty(), {"tracing_endpoint", "tracing_protocol"},
                 absl::StrCat("--tracing_endpoint: ", problem));
  }
  for (const auto& [name, value] : tracing.headers) {
    errors.Check(!name.empty(), {"tracing_headers"}, "--tracing_headers: a header has no name");
    // A line break would end the header early and start another.
    const bool one_line = name.find_first_of("\r\n") == std::string::npos &&
                          value.find_first_of("\r\n") == std::string::npos;
    errors.Check(one_line, {"tracing_headers"},
                 absl::StrCat("--tracing_headers: header '", name, "' holds a line break"));
  }
  errors.Check(tracing.timeout > absl::ZeroDuration(), {"tracing_timeout"},
               "--tracing_timeout must be positive");
  // Written so that NaN fails too.
  errors.Check(tracing.sampling_rate >= 0 && tracing.sampling_rate <= 1,
               {"tracing_sampling_rate"},
               absl::StrCat("--tracing_sampling_rate: ", tracing.sampling_rate,
                            " is not between 0 and 1"));
  errors.AtLeastOne("tracing_max_queue_spans", tracing.max_queue_spans);
  const int32_t batch = tracing.max_export_spans;
  errors.Check(batch >= 1 && batch <= tracing.max_queue_spans,
               {"tracing_max_export_spans", "tracing_max_queue_spans"},
               absl::StrCat("--tracing_max_export_spans: ", batch,
                            " is not between 1 and --tracing_max_queue_spans (",
                            tracing.max_queue_spans, ")"));
  errors.Check(tracing.export_interval > absl::ZeroDuration(), {"tracing_export_interval"},
               "--tracing_export_interval must be positive");
}

// --backend=memcached: where the servers are, and TLS to them.
void CheckMemcached(const BackendSettings& backend, Errors& errors) {
  const MemcachedSettings& memcached = backend.memcached;
  errors.Check(memcached.tls_cert.empty() == memcached.tls_key.empty(),
               {"memcached_tls_cert", "memcached_tls_key"},
               "--memcached_tls_cert and --memcached_tls_key go together (mutual TLS to "
               "memcached)");
  if (!memcached.tls) {
    const std::pair<absl::string_view, bool> set[] = {
        {"memcached_tls_ca", !memcached.tls_ca.empty()},
        {"memcached_tls_cert", !memcached.tls_cert.empty()},
        {"memcached_tls_key", !memcached.tls_key.empty()},
        {"memcached_tls_server_name", !memcached.tls_server_name.empty()},
        {"memcached_tls_skip_hostname_verification", memcached.tls_skip_hostname_verification},
    };
    for (const auto& [flag, is_set] : set) {
      errors.Check(!is_set, {flag, "memcached_tls"},
                   absl::StrCat("--", flag, " needs --memcached_tls"));
    }
  }
  if (backend.kind != BackendKind::kMemcached) {
    errors.Check(memcached.servers.empty() && memcached.srv.empty(),
                 {memcached.srv.empty() ? "memcached_servers" : "memcached_srv", "backend"},
                 "--memcached_servers and --memcached_srv need --backend=memcached");
    return;
  }
  errors.Check(memcached.servers.empty() != memcached.srv.empty(),
               {"memcached_servers", "memcached_srv"},
               memcached.servers.empty()
                   ? "--backend=memcached needs --memcached_servers (HOST:PORT,...) or "
                     "--memcached_srv (_service._proto.name)"
                   : "--memcached_servers and --memcached_srv are exclusive (as upstream's "
                     "MEMCACHE_HOST_PORT and MEMCACHE_SRV)");
  if (!memcached.srv.empty()) {
    std::vector<absl::string_view> parts = absl::StrSplit(memcached.srv, absl::MaxSplits('.', 2));
    errors.Check(parts.size() == 3 && parts[0].size() > 1 && parts[0][0] == '_' &&
                     parts[1].size() > 1 && parts[1][0] == '_' && !parts[2].empty(),
                 {"memcached_srv"},
                 absl::StrCat("--memcached_srv: '", memcached.srv,
                              "' is not an SRV name, _service._proto.name (e.g. "
                              "_memcache._tcp.memcached.default.svc.cluster.local)"));
  }
  errors.Check(memcached.srv_refresh >= absl::ZeroDuration(), {"memcached_srv_refresh"},
               "--memcached_srv_refresh must not be negative");
  errors.Check(memcached.srv_refresh == absl::ZeroDuration() || !memcached.srv.empty(),
               {"memcached_srv_refresh", "memcached_srv"},
               "--memcached_srv_refresh needs --memcached_srv");
  errors.AtLeastOne("memcached_connections", memcached.connections);
  for (const std::string& address : memcached.servers) {
    if (absl::StartsWith(address, "unix:")) {
      errors.Check(address.size() > 5, {"memcached_servers"},
                   "--memcached_servers: 'unix:' names no socket");
      errors.Check(!memcached.tls, {"memcached_tls", "memcached_servers"},
                   absl::StrCat("--memcached_tls: '", address,
                                "' in --memcached_servers is a unix socket; TLS to memcached is "
                                "over TCP (HOST:PORT)"));
      continue;
    }
    const absl::Status valid = ValidateHostPort(address, 1);
    errors.Check(valid.ok(), {"memcached_servers"},
                 absl::StrCat("--memcached_servers: ", valid.message(),
                              " (each server is HOST:PORT or unix:PATH)"));
  }
}

void CheckBackend(const BackendSettings& backend, Errors& errors) {
  errors.Check(!backend.per_second_kind.has_value() || backend.kind != BackendKind::kMemory,
               {"redis_per_second_backend", "backend"},
               "--redis_per_second_backend needs --backend=redis or redis_cluster");
  const RedisSettings& redis = backend.shared;
  // Checked whatever the backend, as they always were.
  errors.Check(redis.timeout > absl::ZeroDuration(), {"redis_timeout"},
               "--redis_timeout must be positive");
  errors.AtLeastOne("redis_max_batch", redis.max_batch);
  errors.Check(redis.lease_rate >= 0, {"redis_lease_rate"},
               "--redis_lease_rate must be 0 (no leases) or positive");
  errors.Check(redis.lease_window > absl::ZeroDuration(), {"redis_lease_window"},
               "--redis_lease_window must be positive");
  errors.Check(redis.lease_life > absl::ZeroDuration(), {"redis_lease_life"},
               "--redis_lease_life must be positive");
  errors.Check(redis.lease_max_share > 0 && redis.lease_max_share <= 1, {"redis_lease_max_share"},
               "--redis_lease_max_share must be in (0, 1]");
  errors.Mib("memory_max_mib", backend.memory_max_mib);
  CheckMemcached(backend, errors);
  if (backend.kind == BackendKind::kMemory) {
    return;
  }
  const bool main_cluster = backend.kind == BackendKind::kRedisCluster;
  errors.Check(
      redis.db == 0 || (!main_cluster && backend.per_second_kind != BackendKind::kRedisCluster),
      {"redis_db", main_cluster ? "backend" : "redis_per_second_backend"},
      "--redis_db: a Redis Cluster has only database 0");
  errors.AtLeastOne("redis_io_threads", redis.io_threads);
  errors.Check(redis.queue_grace >= absl::ZeroDuration(), {"redis_queue_grace"},
               "--redis_queue_grace must not be negative");
  errors.Check(redis.expiration_jitter >= absl::ZeroDuration(), {"redis_expiration_jitter"},
               "--redis_expiration_jitter must not be negative");
  errors.Check(redis.breaker_failures >= 0, {"redis_breaker_failures"},
               "--redis_breaker_failures must not be negative");
  errors.Check(redis.breaker_open > absl::ZeroDuration(), {"redis_breaker_open"},
               "--redis_breaker_open must be positive");
  errors.Check(redis.breaker_open_min > absl::ZeroDuration(), {"redis_breaker_open_min"},
               "--redis_breaker_open_min must be positive");
  if (backend.kind == BackendKind::kMemcached) {
    errors.Check(!backend.per_second_kind.has_value(), {"redis_per_second_backend", "backend"},
                 "--redis_per_second_backend needs --backend=redis or redis_cluster");
    return;
  }
  CheckRedisTarget(backend.redis, backend.kind == BackendKind::kRedisCluster, "redis_",
                   "backend", errors);
  if (backend.per_second_kind.has_value()) {
    CheckRedisTarget(backend.per_second, *backend.per_second_kind == BackendKind::kRedisCluster,
                     "redis_per_second_", "redis_per_second_backend", errors);
  }
  CheckRedisTls(backend, errors);
}

}  // namespace

absl::string_view BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kMemory:
      return "memory";
    case BackendKind::kRedis:
      return "redis";
    case BackendKind::kRedisCluster:
      return "redis_cluster";
    case BackendKind::kMemcached:
      return "memcached";
  }
  return "memory";  // unreachable for a valid enumerator
}

absl::string_view ConfigSourceKindName(ConfigSourceKind source) {
  return source == ConfigSourceKind::kXds ? "xds" : "files";
}

absl::string_view RedisClockSourceName(RedisClockSource source) {
  return source == RedisClockSource::kLocal ? "local" : "redis";
}

absl::string_view StatsdProtocolName(StatsdSettings::Protocol protocol) {
  return protocol == StatsdSettings::Protocol::kTcp ? "tcp" : "udp";
}

absl::string_view TracingProtocolName(TracingProtocol protocol) {
  return protocol == TracingProtocol::kGrpc ? "grpc" : "http";
}

namespace {

// The admin API: a token, or listeners only this host reaches (admin_auth.h).
void CheckAdmin(const Settings& settings, Errors& errors) {
  const AdminSettings& admin = settings.admin;
  errors.Check(admin.enabled || admin.token_file.empty(), {"admin_token_file", "admin_api"},
               "--admin_token_file needs --admin_api (the admin API it guards is off)");
  if (!admin.enabled || !admin.token_file.empty()) {
    return;
  }
  for (const auto& [flag, address] :
       {std::pair<absl::string_view, absl::string_view>{"http_address", settings.http.address},
        {"debug_address", settings.http.debug_address}}) {
    errors.Check(address.empty() || IsLoopbackListenAddress(address),
                 {"admin_token_file", "admin_api", flag},
                 absl::StrCat("--admin_api without --admin_token_file serves the admin API to "
                              "anyone who reaches --",
                              flag, "=", address,
                              ", which is not a loopback address: give --admin_token_file=FILE "
                              "(a bearer token), or listen on 127.0.0.1:PORT, [::1]:PORT or "
                              "localhost:PORT"));
  }
}

}  // namespace

std::vector<SettingError> ValidateSettings(const Settings& settings) {
  Errors errors;
  CheckConfig(settings.config, errors);
  errors.Check(!settings.check_config || settings.config.source == ConfigSourceKind::kFiles,
               {"check_config", "config_source"},
               "--check_config checks config files (--config), not --config_source=xds");
  CheckBackend(settings.backend, errors);
  CheckLimiter(settings.limiter, errors);
  CheckListeners(settings, errors);
  CheckBackendWait(settings.wait_for_backend, errors);
  CheckPrometheus(settings.prometheus, errors);
  CheckStatsd(settings.statsd, errors);
  CheckTracing(settings.tracing, errors);
  CheckAdmin(settings, errors);
  return errors.Take();
}

}  // namespace sluice
