// sluice: the rate-limit decision server. This file holds the flags (each takes its default
// from Settings, server/settings/settings.h, where its meaning is documented) and main(), which
// loads the settings (envoyproxy/ratelimit's variables < SLUICE_* variables < the command
// line), reports everything wrong with them at once, and hands them to RunProcess
// (server/process/process.h): settings -> assembly -> lifecycle.
#include <curl/curl.h>

#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/process/process.h"
#include "server/settings/load_settings.h"
#include "server/settings/settings.h"

namespace {

const sluice::Settings& Defaults() {
  static const auto* defaults = new sluice::Settings();
  return *defaults;
}

std::string PerSecondBackendName(std::optional<sluice::BackendKind> kind) {
  return kind.has_value() ? std::string(sluice::BackendKindName(*kind)) : "";
}

constexpr char kUsage[] =
    "Sluice rate-limit service (Envoy RLS v3).\n"
    "  sluice --config=PATH [--grpc_address=HOST:PORT] [--http_address=HOST:PORT]\n"
    "Every flag can also be set as environment variable SLUICE_<FLAG IN UPPER CASE>;\n"
    "envoyproxy/ratelimit's environment variables (PORT, REDIS_URL, RUNTIME_ROOT, ...) are\n"
    "read too, below both (see README, Migrating from envoyproxy/ratelimit).";

}  // namespace

ABSL_FLAG(std::string, config, Defaults().config.path,
          "YAML config file, or a directory of *.yaml files (one domain each)");
ABSL_FLAG(std::string, default_config, Defaults().config.default_path,
          "the --config to use when nothing names the rules (no --config, no "
          "--config_source=xds) and none of envoyproxy/ratelimit's variables is set; the image "
          "sets SLUICE_DEFAULT_CONFIG=/etc/sluice/config");
ABSL_FLAG(std::string, grpc_address, Defaults().grpc.address,
          "gRPC listen address: HOST:PORT (port 0: any free one), unix:PATH or "
          "unix-abstract:NAME");
ABSL_FLAG(std::string, tls_cert, Defaults().grpc.tls_cert,
          "gRPC over TLS: PEM certificate chain file (with --tls_key); empty: plaintext");
ABSL_FLAG(std::string, tls_key, Defaults().grpc.tls_key,
          "gRPC over TLS: PEM private key file of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, Defaults().grpc.tls_client_ca,
          "mutual TLS: PEM CA bundle; clients must present a certificate it signed");
ABSL_FLAG(std::string, tls_client_san, Defaults().grpc.tls_client_san,
          "with --tls_client_ca: the client certificate must hold this DNS name or IP address "
          "among its subject alternative names");
ABSL_FLAG(absl::Duration, tls_reload_interval, Defaults().grpc.tls_reload_interval,
          "how often the TLS files are re-read, so that a rotated certificate is served to new "
          "connections without a restart");
ABSL_FLAG(bool, rlqs, Defaults().grpc.rlqs,
          "serve Envoy's Rate Limit Quota Service (RLQS, rate_limit_quota filter) on the gRPC "
          "listener: each Envoy enforces locally its fair share of the configured limits");
ABSL_FLAG(absl::Duration, rlqs_rebalance_interval, Defaults().grpc.rlqs_rebalance_interval,
          "RLQS: how often every bucket's shares are recomputed and moved ones sent");
ABSL_FLAG(int64_t, rlqs_max_streams, Defaults().grpc.rlqs_max_streams,
          "RLQS: most streams (Envoys) held at once; more are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, rlqs_max_buckets_per_stream, Defaults().grpc.rlqs_max_buckets_per_stream,
          "RLQS: most buckets one stream may report; one more ends it with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, rlqs_max_subscriptions, Defaults().grpc.rlqs_max_subscriptions,
          "RLQS: most (stream, bucket) pairs held over all streams; a stream whose new bucket "
          "would pass it ends with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, rlqs_max_streams_per_peer, Defaults().grpc.rlqs_max_streams_per_peer,
          "RLQS: most streams of one client address (IP); more are refused with "
          "RESOURCE_EXHAUSTED, so that one peer cannot take every stream");
ABSL_FLAG(int64_t, rlqs_max_mib, Defaults().grpc.rlqs_max_mib,
          "RLQS: most MiB of quota-stream state (buckets, subscriptions) held in all; a stream "
          "whose new bucket would pass it ends with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, rlqs_max_peer_mib, Defaults().grpc.rlqs_max_peer_mib,
          "RLQS: most MiB of state the streams of one client address hold together");
ABSL_FLAG(int64_t, rlqs_max_stream_mib, Defaults().grpc.rlqs_max_stream_mib,
          "RLQS: most MiB of state one stream holds (its buckets' ids count in full)");
ABSL_FLAG(int64_t, rlqs_max_pending_kib, Defaults().grpc.rlqs_max_pending_kib,
          "RLQS: most KiB of responses waiting behind a stream's write in flight (the newest "
          "per bucket; a message that can go at once always goes); past it the stream is ended");
ABSL_FLAG(int64_t, rlqs_max_pending_mib, Defaults().grpc.rlqs_max_pending_mib,
          "RLQS: most MiB of responses waiting or in flight in all streams; past it a stream "
          "whose write has waited a second is ended when more is queued for it");
ABSL_FLAG(absl::Duration, rlqs_write_timeout, Defaults().grpc.rlqs_write_timeout,
          "RLQS: a response its peer has not read for this long ends the stream (the peer does "
          "not read)");
ABSL_FLAG(bool, rlqs_newcomer_waits, Defaults().grpc.rlqs_newcomer_waits,
          "RLQS: a new Envoy on a bucket whose shares are held gets only the room they leave "
          "(DENY_ALL when none) until the next rebalance, instead of its fair share at once "
          "with the others' lowered at once");
ABSL_FLAG(bool, rlqs_page_values, Defaults().grpc.rlqs_page_values,
          "GET /rlqs shows buckets' descriptor values as sent (escaped); by default they are "
          "redacted to their length and a hash");
ABSL_FLAG(absl::Duration, grpc_max_connection_age, Defaults().grpc.max_connection_age,
          "a client connection older than this (+/-10%, gRPC's jitter) is sent a GOAWAY and the "
          "client reconnects, so that connections spread over replicas added since; 0: never "
          "(envoyproxy/ratelimit's GRPC_MAX_CONNECTION_AGE, default 24h under its variables)");
ABSL_FLAG(absl::Duration, grpc_max_connection_age_grace,
          Defaults().grpc.max_connection_age_grace,
          "after that GOAWAY, how long calls still running may take before the connection is "
          "closed; 0: no limit (GRPC_MAX_CONNECTION_AGE_GRACE, default 1h under upstream's "
          "variables)");
ABSL_FLAG(std::string, http_address, Defaults().http.address,
          "HTTP listen address for /json, /healthz, /healthcheck, /readyz, /config, /rlconfig, "
          "/metrics (HOST:PORT)");
ABSL_FLAG(std::string, debug_address, Defaults().http.debug_address,
          "a second HTTP listen address with the same endpoints (envoyproxy/ratelimit's debug "
          "port, where it serves /rlconfig and stats); empty: none");
ABSL_FLAG(bool, debug_address_required, Defaults().http.debug_address_required,
          "a --debug_address that cannot be listened on stops the start; false: a warning, and "
          "Sluice serves without it (as envoyproxy/ratelimit, whose variables set it false)");
ABSL_FLAG(int32_t, http_max_connections, Defaults().http.max_connections,
          "most HTTP connections open at once (both HTTP addresses together), at most half of "
          "the file-descriptor limit (ulimit -n); at the cap, the connection waiting longest for "
          "its request is closed to make room");
ABSL_FLAG(absl::Duration, http_request_timeout, Defaults().http.request_timeout,
          "an HTTP request whose head and body have not all arrived this long after its "
          "connection was accepted (keep-alive: after its first byte) is dropped with its "
          "connection");
ABSL_FLAG(absl::Duration, http_answer_timeout, Defaults().http.answer_timeout,
          "an HTTP answer not read whole this long after it was sent closes its connection, "
          "however steadily the client reads (here and on --prometheus_address)");
ABSL_FLAG(int64_t, metrics_max_page_bytes, Defaults().http.metrics_max_page_bytes,
          "largest /metrics page (and --prometheus_address's); per-rule series that do not fit "
          "are left out, the config's own keys and the most hit kept first, and counted in "
          "sluice_metrics_rule_series_left_out");
ABSL_FLAG(int64_t, config_dump_max_bytes, Defaults().http.config_dump_max_bytes,
          "largest /config (/rlconfig) page; a longer one is cut at a line boundary, its last "
          "line saying so");
ABSL_FLAG(std::string, prometheus_address, Defaults().prometheus.address,
          "HOST:PORT serving envoyproxy/ratelimit's Prometheus metric names (its "
          "USE_PROMETHEUS), mapped from its statsd names as statsd_exporter does; empty: off");
ABSL_FLAG(std::string, prometheus_path, Defaults().prometheus.path,
          "the path of --prometheus_address's metrics");
ABSL_FLAG(std::string, prometheus_mapper, Defaults().prometheus.mapper,
          "statsd_exporter mapping file for --prometheus_address (glob and regex rules, "
          "labels, drop, histogram buckets); empty: the rules of upstream's default mapping");
ABSL_FLAG(bool, prometheus_response_time_ms, Defaults().prometheus.response_time_ms,
          "the built-in mapping serves response times in milliseconds, as upstream's "
          "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS (no effect with --prometheus_mapper)");
ABSL_FLAG(std::string, statsd_address, Defaults().statsd.address,
          "HOST:PORT to send envoyproxy/ratelimit's statsd names to every "
          "--statsd_flush_interval, as its USE_STATSD and USE_DOG_STATSD sinks do; empty: off "
          "(under upstream's variables: STATSD_HOST:STATSD_PORT, localhost:8125, unless "
          "USE_STATSD=false)");
ABSL_FLAG(std::string, statsd_protocol,
          std::string(sluice::StatsdProtocolName(Defaults().statsd.protocol)),
          "udp or tcp (upstream's plain statsd sink uses tcp unless STATSD_PROTOCOL=udp)");
ABSL_FLAG(bool, statsd_dogstatsd, Defaults().statsd.dogstatsd,
          "send DogStatsD: tags after |# (--statsd_extra_tags, --statsd_dogstatsd_tags, the "
          "mogrifiers') rather than in the name (upstream's USE_DOG_STATSD)");
ABSL_FLAG(absl::Duration, statsd_flush_interval, Defaults().statsd.flush_interval,
          "how often --statsd_address is sent what changed (upstream's STATS_FLUSH_INTERVAL)");
ABSL_FLAG(std::string, statsd_extra_tags, "",
          "key:value,... tags on every statsd name (upstream's EXTRA_TAGS): in the name as "
          "name.__key=value, or DogStatsD tags");
ABSL_FLAG(std::string, statsd_dogstatsd_tags, "",
          "tag,... sent as given first on every DogStatsD line (under upstream's variables: "
          "DD_ENV, DD_SERVICE, DD_VERSION and DD_ENTITY_ID, as its Datadog client adds them)");
ABSL_FLAG(std::string, statsd_mogrifiers, "",
          "DogStatsD mogrifiers as a YAML or JSON list of {pattern, name, tags, id}: the first "
          "rule whose RE2 pattern matches a name sends it as `name` with `tags` "
          "(\"key:value,...\"), $1... standing for its groups (upstream's "
          "USE_DOG_STATSD_MOGRIFIERS and DOG_STATSD_MOGRIFIER_<ID>_PATTERN, _NAME, _TAGS)");
ABSL_FLAG(std::string, backend, std::string(sluice::BackendKindName(Defaults().backend.kind)),
          "where limits are kept: memory (in process), redis, redis_cluster or memcached (shared "
          "by every replica; memcached keeps fixed windows only)");
ABSL_FLAG(std::string, redis_addresses, absl::StrJoin(Defaults().backend.redis.addresses, ","),
          "redis: the server, HOST:PORT; redis_cluster: seed nodes, HOST:PORT,HOST:PORT,... "
          "(not with --redis_sentinels, which find the server)");
ABSL_FLAG(std::string, redis_username, Defaults().backend.redis.username,
          "Redis ACL user (with --redis_password)");
ABSL_FLAG(std::string, redis_password, Defaults().backend.redis.password, "Redis password (AUTH)");
ABSL_FLAG(bool, redis_tls, Defaults().backend.redis.tls,
          "TLS to the Redis of --redis_addresses (HOST:PORT, not unix:), with the "
          "--redis_tls_* files");
ABSL_FLAG(std::string, redis_tls_ca, Defaults().backend.shared.tls_ca,
          "--redis_tls, --redis_per_second_tls: PEM CA bundle trusted besides the system's "
          "roots");
ABSL_FLAG(std::string, redis_tls_cert, Defaults().backend.shared.tls_cert,
          "--redis_tls, --redis_per_second_tls: PEM certificate chain of this client, for a Redis "
          "that asks for one (with --redis_tls_key)");
ABSL_FLAG(std::string, redis_tls_key, Defaults().backend.shared.tls_key,
          "--redis_tls, --redis_per_second_tls: PEM key of --redis_tls_cert");
ABSL_FLAG(std::string, redis_tls_server_name, Defaults().backend.shared.tls_server_name,
          "--redis_tls, --redis_per_second_tls: the name sent as SNI and checked in the server's "
          "certificate (empty: each node's host)");
ABSL_FLAG(bool, redis_tls_skip_hostname_verification,
          Defaults().backend.shared.tls_skip_hostname_verification,
          "--redis_tls, --redis_per_second_tls: verify the server's certificate chain but not "
          "the name in it (upstream's REDIS_TLS_SKIP_HOSTNAME_VERIFICATION)");
ABSL_FLAG(std::string, redis_sentinels, absl::StrJoin(Defaults().backend.redis.sentinels, ","),
          "redis: Redis Sentinel, HOST:PORT,HOST:PORT,... of the sentinels, asked for the master "
          "of --redis_sentinel_master and followed through failovers (in place of "
          "--redis_addresses; --redis_tls applies to the sentinels too)");
ABSL_FLAG(std::string, redis_sentinel_master, Defaults().backend.redis.sentinel_master,
          "with --redis_sentinels: the master's name as the sentinels know it");
ABSL_FLAG(std::string, redis_sentinel_username, Defaults().backend.redis.sentinel_username,
          "ACL user of the sentinels (with --redis_sentinel_password); the master's is "
          "--redis_username");
ABSL_FLAG(std::string, redis_sentinel_password, Defaults().backend.redis.sentinel_password,
          "password of the sentinels (AUTH); the master's is --redis_password");
ABSL_FLAG(int32_t, redis_db, Defaults().backend.shared.db,
          "Redis database number (standalone only)");
ABSL_FLAG(std::string, redis_key_prefix, Defaults().limiter.key_prefix,
          "prefix of every key Sluice writes");
ABSL_FLAG(std::string, redis_key_layout,
          std::string(sluice::KeyLayoutName(Defaults().backend.shared.key_layout)),
          "keys of fixed windows on Redis: sluice (<prefix>{domain|key=value...}fw:60:w<n>, "
          "co-located by hash tag) or upstream (envoyproxy/ratelimit's <prefix>domain_key_value_"
          "..._<window start>, INCRBY then EXPIRE, shared with upstream's replicas on the same "
          "Redis during a migration; upstream's variables select it). Other algorithms and "
          "co-located groups keep Sluice's keys");
ABSL_FLAG(absl::Duration, redis_expiration_jitter, Defaults().backend.shared.expiration_jitter,
          "--redis_key_layout=upstream: a window key's TTL is lengthened by up to this, in whole "
          "seconds at random (upstream's EXPIRATION_JITTER_MAX_SECONDS)");
ABSL_FLAG(absl::Duration, redis_timeout, Defaults().backend.shared.timeout,
          "per-decision budget; past it the decision follows the failure mode (--failure_mode, "
          "or the domain's failure_mode:)");
ABSL_FLAG(absl::Duration, redis_queue_grace, Defaults().backend.shared.queue_grace,
          "time a decision waits inside Sluice before its Redis call is written (for an I/O "
          "thread, or behind a lane's calls) that is not charged to --redis_timeout, per wait; "
          "a decision answers within the budget plus at most twice this");
ABSL_FLAG(std::string, redis_clock,
          std::string(sluice::RedisClockSourceName(Defaults().backend.shared.clock)),
          "redis: Redis' clock, one for all replicas (this process's clock plus an offset "
          "sampled with TIME every second); local: this process's clock (replicas must agree)");
ABSL_FLAG(int32_t, redis_io_threads, Defaults().backend.shared.io_threads, "Redis I/O threads");
ABSL_FLAG(int32_t, redis_connections, Defaults().backend.redis.connections,
          "Redis connections per I/O thread");
ABSL_FLAG(int32_t, redis_max_batch, Defaults().backend.shared.max_batch,
          "redis: most lone checks of one algorithm, from any requests, decided by one script "
          "call (1: each request's checks on their own); ignored by redis_cluster");
ABSL_FLAG(double, redis_lease_rate, Defaults().backend.shared.lease_rate,
          "decisions a second of one key on this replica that make it hot: the replica then takes "
          "leases of the key's units from Redis and admits from them in process (token bucket, "
          "GCRA, fixed window); 0: no leases");
ABSL_FLAG(absl::Duration, redis_lease_window, Defaults().backend.shared.lease_window,
          "a lease is this long of the key's rate on this replica");
ABSL_FLAG(absl::Duration, redis_lease_life, Defaults().backend.shared.lease_life,
          "a lease's unused units go back to Redis this long after its last grant");
ABSL_FLAG(double, redis_lease_max_share, Defaults().backend.shared.lease_max_share,
          "the replicas (--replicas_hint) together hold at most this share of a hot key's "
          "remaining budget in leases");
ABSL_FLAG(bool, redis_caller_writes, Defaults().backend.shared.caller_writes,
          "a request thread writes its Redis commands itself when the connection is idle, "
          "sparing the I/O thread a wake-up (false: the I/O thread writes every command)");
ABSL_FLAG(int64_t, max_rule_metric_series, Defaults().limiter.max_rule_metric_series,
          "stat keys with per-rule counters of their own (detailed_metric rules and limit "
          "overrides make one per request value); past it they count under key=\"_folded\"");
ABSL_FLAG(absl::Duration, rule_metric_ttl, Defaults().limiter.rule_metric_ttl,
          "a per-rule metric series not counted for this long is dropped, making room under "
          "--max_rule_metric_series (a config's own keys stay while their config is in force); "
          "0: never");
ABSL_FLAG(int32_t, redis_breaker_failures, Defaults().backend.shared.breaker_failures,
          "after this many Redis calls in a row to one node fail (timeout, connection), its "
          "decisions go to --failure_mode at once until a probe of Sluice's own (a PING) is "
          "answered; 0: no circuit breaker");
ABSL_FLAG(absl::Duration, redis_breaker_open, Defaults().backend.shared.breaker_open,
          "the longest a node's open circuit breaker answers by --failure_mode before Sluice "
          "probes the node again (each failed probe doubles the wait from "
          "--redis_breaker_open_min)");
ABSL_FLAG(absl::Duration, redis_breaker_open_min, Defaults().backend.shared.breaker_open_min,
          "how long a node's circuit breaker stays open before the first probe (a PING)");
ABSL_FLAG(std::string, redis_per_second_backend,
          PerSecondBackendName(Defaults().backend.per_second_kind),
          "a second Redis for rules with a one-second period (envoyproxy/ratelimit's "
          "REDIS_PERSECOND): redis or redis_cluster; empty: none");
ABSL_FLAG(std::string, redis_per_second_addresses,
          absl::StrJoin(Defaults().backend.per_second.addresses, ","),
          "--redis_per_second_backend's address(es), as --redis_addresses");
ABSL_FLAG(std::string, redis_per_second_username, Defaults().backend.per_second.username,
          "ACL user of the per-second Redis");
ABSL_FLAG(std::string, redis_per_second_password, Defaults().backend.per_second.password,
          "password of the per-second Redis");
ABSL_FLAG(bool, redis_per_second_tls, Defaults().backend.per_second.tls,
          "TLS to the per-second Redis, with the --redis_tls_* files");
ABSL_FLAG(std::string, redis_per_second_sentinels,
          absl::StrJoin(Defaults().backend.per_second.sentinels, ","),
          "the per-second Redis through Redis Sentinel, as --redis_sentinels (in place of "
          "--redis_per_second_addresses)");
ABSL_FLAG(std::string, redis_per_second_sentinel_master,
          Defaults().backend.per_second.sentinel_master,
          "with --redis_per_second_sentinels: the per-second master's name");
ABSL_FLAG(std::string, redis_per_second_sentinel_username,
          Defaults().backend.per_second.sentinel_username,
          "ACL user of the per-second Redis's sentinels");
ABSL_FLAG(std::string, redis_per_second_sentinel_password,
          Defaults().backend.per_second.sentinel_password,
          "password of the per-second Redis's sentinels");
ABSL_FLAG(int32_t, redis_per_second_connections, Defaults().backend.per_second.connections,
          "per-second Redis connections per I/O thread");
ABSL_FLAG(std::string, memcached_servers, absl::StrJoin(Defaults().backend.memcached.servers, ","),
          "--backend=memcached: the servers, HOST:PORT,... (or unix:PATH), keys placed over them "
          "in this order as envoyproxy/ratelimit places them (not with --memcached_srv)");
ABSL_FLAG(std::string, memcached_srv, Defaults().backend.memcached.srv,
          "--backend=memcached: a DNS SRV name, _service._proto.name, whose targets are the "
          "servers (not with --memcached_servers)");
ABSL_FLAG(absl::Duration, memcached_srv_refresh, Defaults().backend.memcached.srv_refresh,
          "how often --memcached_srv is looked up again (0: only at start)");
ABSL_FLAG(int32_t, memcached_connections, Defaults().backend.memcached.connections,
          "connections to each memcached server (pipelined)");
ABSL_FLAG(bool, memcached_tls, Defaults().backend.memcached.tls,
          "TLS to the memcached servers (HOST:PORT, not unix:)");
ABSL_FLAG(std::string, memcached_tls_ca, Defaults().backend.memcached.tls_ca,
          "--memcached_tls: PEM CA bundle trusted besides the system's roots");
ABSL_FLAG(std::string, memcached_tls_cert, Defaults().backend.memcached.tls_cert,
          "--memcached_tls: PEM certificate chain of this client (with --memcached_tls_key)");
ABSL_FLAG(std::string, memcached_tls_key, Defaults().backend.memcached.tls_key,
          "--memcached_tls: PEM key of --memcached_tls_cert");
ABSL_FLAG(std::string, memcached_tls_server_name, Defaults().backend.memcached.tls_server_name,
          "--memcached_tls: the name sent as SNI and checked in each server's certificate, in "
          "place of its host");
ABSL_FLAG(bool, memcached_tls_skip_hostname_verification,
          Defaults().backend.memcached.tls_skip_hostname_verification,
          "--memcached_tls: verify the servers' certificate chain but not the name in it");
ABSL_FLAG(int64_t, over_limit_cache_keys, Defaults().limiter.over_limit_cache_keys,
          "redis backend: keys remembered as over limit, answered without a Redis call until "
          "their retry time (0 disables)");
ABSL_FLAG(int64_t, over_limit_cache_max_mib, Defaults().limiter.over_limit_cache_max_mib,
          "redis backend: most heap the over-limit cache holds, in MiB (keys included); past "
          "it, or past --over_limit_cache_keys, a new key evicts old ones");
ABSL_FLAG(std::string, failure_mode,
          std::string(sluice::FailureModeName(Defaults().limiter.failure_mode)),
          "when the backend cannot answer in budget: allow (answer OK), deny (OVER_LIMIT) or "
          "local (decide in process on this replica's share of each limit, see "
          "--replicas_hint); a domain's failure_mode: overrides it");
ABSL_FLAG(int32_t, replicas_hint, Defaults().limiter.replicas_hint,
          "failure_mode local: the number of Sluice replicas sharing the Redis; each admits "
          "1/replicas_hint of a rule's limit and burst, rounded up (a rule's local_share "
          "overrides)");
ABSL_FLAG(bool, check_config, Defaults().check_config,
          "validate the config, print the result and exit 0 or 1");
ABSL_FLAG(std::string, log_level, std::string(sluice::LogLevelName(Defaults().log.level)),
          "debug, info, warning or error");
ABSL_FLAG(std::string, log_format, std::string(sluice::LogFormatName(Defaults().log.format)),
          "text, or json (one object a line: @timestamp, level, caller, @message)");
ABSL_FLAG(bool, config_recursive, Defaults().config.recursive,
          "read --config as envoyproxy/ratelimit's runtime directory: every file of any name "
          "below it, subdirectories too (..data and other .. names of a ConfigMap skipped)");
ABSL_FLAG(bool, config_ignore_dot_files, Defaults().config.ignore_dot_files,
          "with --config_recursive: also skip files and directories whose names start with '.'");
ABSL_FLAG(int64_t, config_max_file_bytes, Defaults().config.max_file_bytes,
          "a config file larger than this is refused before it is parsed");
ABSL_FLAG(int64_t, config_max_nodes, Defaults().config.max_nodes,
          "most YAML nodes (maps, lists, keys, values) a config may hold over all its files, "
          "every alias counted as the whole content of its anchor each time it is used");
ABSL_FLAG(int64_t, config_max_scalar_bytes, Defaults().config.max_scalar_bytes,
          "most bytes of YAML scalars (keys and values) a config may hold over all its files, "
          "aliases counted as for --config_max_nodes");
ABSL_FLAG(bool, merge_domain_config, Defaults().config.merge_domains,
          "several files may define one domain; their descriptors are merged");
ABSL_FLAG(bool, strict_config, Defaults().config.strict,
          "refuse a config envoyproxy/ratelimit loads leniently (one of its keys out of place, "
          "a key given twice, an empty boolean or number, a second YAML document; an unknown "
          "metadata.sluice key over xDS) instead of loading it with a warning");
ABSL_FLAG(bool, force_start_without_initial_config,
          Defaults().config.force_start_without_initial_config,
          "serve even if the config cannot be loaded at start (calls fail UNAVAILABLE until a "
          "valid one is loaded); otherwise a bad config at start is fatal");
ABSL_FLAG(bool, healthy_with_at_least_one_config_loaded, Defaults().healthy_requires_config,
          "/healthcheck and gRPC health answer unhealthy while the config has no domain");
ABSL_FLAG(double, near_limit_ratio, Defaults().limiter.near_limit_ratio,
          "share of a rule's capacity past which hits count as near_limit in /metrics");
ABSL_FLAG(bool, shadow_mode, Defaults().limiter.shadow_mode,
          "global shadow mode: a request over limit is answered OK (statuses still say "
          "OVER_LIMIT; counted in sluice_global_shadow_mode_total)");
ABSL_FLAG(bool, quota_mode, Defaults().limiter.quota_mode,
          "every descriptor is in quota mode (see quota_mode:)");
ABSL_FLAG(bool, response_dynamic_metadata, Defaults().limiter.response_dynamic_metadata,
          "the response's dynamic metadata describes the request and carries the metadata: of "
          "the descriptors that passed");
ABSL_FLAG(bool, rate_limit_headers, Defaults().limiter.rate_limit_headers,
          "add RateLimit-Limit, -Remaining and -Reset headers of the descriptor closest to its "
          "limit, as envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED does");
ABSL_FLAG(std::string, rate_limit_limit_header, Defaults().limiter.limit_header,
          "name of the limit header (--rate_limit_headers)");
ABSL_FLAG(std::string, rate_limit_remaining_header, Defaults().limiter.remaining_header,
          "name of the remaining header (--rate_limit_headers)");
ABSL_FLAG(std::string, rate_limit_reset_header, Defaults().limiter.reset_header,
          "name of the reset header, whole seconds (--rate_limit_headers)");
ABSL_FLAG(bool, ietf_rate_limit_headers, Defaults().limiter.ietf_rate_limit_headers,
          "add RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers) "
          "of the descriptor closest to its limit, named by its rule's name or stat key");
ABSL_FLAG(bool, retry_after_header, Defaults().limiter.retry_after_header,
          "add a retry-after header (whole seconds, rounded up) to OVER_LIMIT answers");
ABSL_FLAG(std::string, default_charge, "if_admitted",
          "whether a denied request's hits are charged, for rules without their own charge: "
          "if_admitted (a denied request consumes nothing) or always (every hit asked is "
          "charged, into debt past the limit: envoyproxy/ratelimit's increment-first, and "
          "usage reported after the response)");
ABSL_FLAG(std::string, default_charge_fixed_window, "",
          "the same for fixed-window rules and descriptors' limit overrides; empty: "
          "--default_charge. envoyproxy/ratelimit's variables set it (always, unless "
          "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true): upstream has only fixed windows, and "
          "the other algorithms keep --default_charge");
ABSL_FLAG(bool, request_all_or_nothing, Defaults().limiter.request_all_or_nothing,
          "a request answered OVER_LIMIT consumes nothing: what its other descriptors took is "
          "given back, on every backend (envoyproxy/ratelimit's "
          "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true sets it); rules that charge always keep "
          "their charges");
ABSL_FLAG(bool, calendar_months, Defaults().limiter.calendar_months,
          "fixed-window rules and limit overrides of unit month count calendar months (UTC: a "
          "window starts at 00:00 on the 1st and lasts to the next 1st) instead of 30 days, as "
          "envoyproxy/ratelimit's USE_CALENDAR_MONTH_RATE_LIMIT");
ABSL_FLAG(std::string, refuse_refunds, "",
          "domains (comma-separated) whose refunds (descriptors with is_negative_hits, Envoy "
          "1.38) are refused with INVALID_ARGUMENT instead of applied; '*': every domain. "
          "Empty (the default): every refund is applied, as envoyproxy/ratelimit does");
ABSL_FLAG(bool, count_denied_hits, Defaults().limiter.count_denied_hits,
          "the older name of --default_charge=always (true wins over --default_charge)");
ABSL_FLAG(int32_t, max_descriptors, Defaults().limiter.max_descriptors,
          "most descriptors accepted in one request");
ABSL_FLAG(int32_t, max_entries, Defaults().limiter.max_entries,
          "most entries accepted in one descriptor");
ABSL_FLAG(int32_t, max_key_bytes, Defaults().limiter.max_key_bytes,
          "longest domain, descriptor key or value accepted");
ABSL_FLAG(int64_t, memory_max_keys, Defaults().backend.memory_max_keys,
          "memory backend, and the failure_mode local store: most keys kept at once");
ABSL_FLAG(int64_t, memory_max_mib, Defaults().backend.memory_max_mib,
          "memory backend, and the failure_mode local store (each): most heap for keys and their "
          "state, in MiB; past it, or past --memory_max_keys, a new key evicts old ones");
ABSL_FLAG(absl::Duration, config_poll_interval, Defaults().config.poll_interval,
          "how often to check the config files for changes (0 disables; SIGHUP always reloads)");
ABSL_FLAG(bool, config_watch, Defaults().config.watch,
          "reload as soon as the config files change (inotify on --config's directory, a "
          "ConfigMap's ..data swap included), besides --config_poll_interval");
ABSL_FLAG(absl::Duration, shutdown_grace, Defaults().shutdown_grace,
          "on SIGTERM, how long in-flight calls may take before they are cancelled");
ABSL_FLAG(bool, wait_for_backend, Defaults().wait_for_backend.enabled,
          "health (gRPC and /healthcheck) answers unhealthy until the backend (every Redis) has "
          "answered once, checked on the --wait_for_backend_* schedule; calls are answered by "
          "the failure mode meanwhile, and after that first answer health no longer follows "
          "the backend (envoyproxy/ratelimit's start-up, on under its variables)");
ABSL_FLAG(absl::Duration, wait_for_backend_initial_interval,
          Defaults().wait_for_backend.initial_interval,
          "--wait_for_backend: the first wait between checks; each later one is drawn from "
          "[initial, initial * 2^n), at most --wait_for_backend_max_interval "
          "(REDIS_STARTUP_INITIAL_INTERVAL)");
ABSL_FLAG(absl::Duration, wait_for_backend_max_interval, Defaults().wait_for_backend.max_interval,
          "--wait_for_backend: the longest wait between checks (REDIS_STARTUP_MAX_INTERVAL)");
ABSL_FLAG(absl::Duration, wait_for_backend_max_elapsed, Defaults().wait_for_backend.max_elapsed,
          "--wait_for_backend: a check that finds the backend still silent this long after it "
          "began connecting stops the process (exit status 1); 0: wait forever "
          "(REDIS_STARTUP_MAX_ELAPSED_TIME)");

ABSL_FLAG(std::string, config_source,
          std::string(sluice::ConfigSourceKindName(Defaults().config.source)),
          "where the rules come from: files (--config) or xds (a management server over an "
          "aggregated xDS stream, state of the world; --xds_*)");
ABSL_FLAG(std::string, xds_server, Defaults().config.xds.server,
          "--config_source=xds: HOST:PORT of the management server");
ABSL_FLAG(std::string, xds_node_id, Defaults().config.xds.node_id,
          "--config_source=xds: the Node id sent to the management server");
ABSL_FLAG(std::string, xds_node_metadata, "",
          "--config_source=xds: key=value,key2=value2, string fields of the Node's metadata");
ABSL_FLAG(std::string, xds_headers, "",
          "--config_source=xds: name:value,name2:value2, gRPC metadata sent on the stream");
ABSL_FLAG(bool, xds_tls, Defaults().config.xds.tls, "--config_source=xds: TLS to the server");
ABSL_FLAG(std::string, xds_tls_ca, Defaults().config.xds.tls_ca,
          "--xds_tls: PEM bundle the server's certificate must chain to (empty: system roots)");
ABSL_FLAG(std::string, xds_tls_cert, Defaults().config.xds.tls_cert,
          "--xds_tls: PEM certificate chain of this client (mutual TLS; with --xds_tls_key)");
ABSL_FLAG(std::string, xds_tls_key, Defaults().config.xds.tls_key,
          "--xds_tls: PEM key of --xds_tls_cert");
ABSL_FLAG(std::string, xds_tls_server_name, Defaults().config.xds.tls_server_name,
          "--xds_tls: the name the server's certificate must hold (empty: --xds_server's host)");
ABSL_FLAG(absl::Duration, xds_connect_retry_interval, Defaults().config.xds.connect_retry_interval,
          "--config_source=xds: wait between connection attempts while the server is "
          "unreachable (randomized by half either way)");
ABSL_FLAG(absl::Duration, xds_backoff_initial, Defaults().config.xds.backoff_initial,
          "--config_source=xds: first wait before reconnecting after a stream broke (doubles "
          "per failure)");
ABSL_FLAG(absl::Duration, xds_backoff_max, Defaults().config.xds.backoff_max,
          "--config_source=xds: longest wait before reconnecting");
ABSL_FLAG(double, xds_backoff_random_factor, Defaults().config.xds.backoff_random_factor,
          "--config_source=xds: with --xds_backoff_jitter, share by which each wait is "
          "randomized either way (0 to 1)");
ABSL_FLAG(bool, xds_backoff_jitter, Defaults().config.xds.backoff_jitter,
          "--config_source=xds: randomize the reconnection waits");
ABSL_FLAG(int64_t, xds_max_message_bytes, Defaults().config.xds.max_message_bytes,
          "--config_source=xds: largest response accepted from the server (0: gRPC's 4 MiB)");

ABSL_FLAG(bool, tracing, Defaults().tracing.enabled,
          "export spans of rate-limit calls over OTLP (--tracing_*); off: no span is made");
ABSL_FLAG(std::string, tracing_protocol,
          std::string(sluice::TracingProtocolName(Defaults().tracing.protocol)),
          "--tracing: http (OTLP/HTTP, protobuf) or grpc (OTLP/gRPC)");
ABSL_FLAG(std::string, tracing_endpoint, Defaults().tracing.endpoint,
          "--tracing: where spans go; http: the traces URL, http[s]://HOST:PORT/PATH; grpc: "
          "http[s]://HOST:PORT or HOST:PORT; empty: http://localhost:4318/v1/traces or "
          "http://localhost:4317");
ABSL_FLAG(bool, tracing_insecure, Defaults().tracing.insecure,
          "--tracing_protocol=grpc with an endpoint without a scheme: plaintext, not TLS");
ABSL_FLAG(std::string, tracing_headers, "",
          "--tracing: name=value,name2=value2, headers sent with every export (e.g. an API key)");
ABSL_FLAG(std::string, tracing_ca, Defaults().tracing.ca,
          "--tracing: PEM bundle an https collector's certificate must chain to (empty: the "
          "system's roots)");
ABSL_FLAG(absl::Duration, tracing_timeout, Defaults().tracing.timeout,
          "--tracing: the longest one export may take");
ABSL_FLAG(double, tracing_sampling_rate, Defaults().tracing.sampling_rate,
          "--tracing: share of calls traced (0 to 1) when the caller did not decide; a caller's "
          "sampled flag is followed");
ABSL_FLAG(std::string, tracing_service_name, Defaults().tracing.service_name,
          "--tracing: the spans' service.name");
ABSL_FLAG(std::string, tracing_service_namespace, Defaults().tracing.service_namespace,
          "--tracing: the spans' service.namespace");
ABSL_FLAG(std::string, tracing_service_instance_id, Defaults().tracing.service_instance_id,
          "--tracing: the spans' service.instance.id (empty: a random UUID made at start)");
ABSL_FLAG(bool, tracing_descriptor_values, Defaults().tracing.descriptor_values,
          "--tracing: put descriptor entries' values on spans, not only their keys (values can "
          "identify users)");
ABSL_FLAG(int32_t, tracing_max_queue_spans, Defaults().tracing.max_queue_spans,
          "--tracing: most spans waiting for export; more are dropped and counted");
ABSL_FLAG(int32_t, tracing_max_export_spans, Defaults().tracing.max_export_spans,
          "--tracing: most spans one export carries (at most --tracing_max_queue_spans)");
ABSL_FLAG(absl::Duration, tracing_export_interval, Defaults().tracing.export_interval,
          "--tracing: the longest a span waits before its export starts");

// The admin API (docs/operations.md, "Resetting and inspecting counters").
ABSL_FLAG(bool, admin_api, Defaults().admin.enabled,
          "serve the admin API on the HTTP addresses: POST /admin/inspect (a descriptor's rules "
          "and their stored state) and POST /admin/reset (delete it, and make every replica "
          "forget its over-limit cache entry); off: /admin/* answers 404");
ABSL_FLAG(std::string, admin_token_file, Defaults().admin.token_file,
          "a file holding the bearer token admin calls must present (Authorization: Bearer "
          "<token>; read once at start, whitespace trimmed); without one, --admin_api needs "
          "--http_address (and --debug_address) on loopback");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const sluice::LoadedSettings loaded = sluice::LoadSettings(argc, argv, __FILE__);
  // gRPC locks absl::Mutex on every call; Debian's abseil checks each lock for deadlock cycles
  // by default, which costs a few percent of CPU per request. (Kept identical in sluice-floor.)
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (!loaded.errors.empty()) {
    for (const std::string& error : loaded.errors) {
      std::fprintf(stderr, "sluice: %s\n", error.c_str());
    }
    return 1;
  }
  // libcurl's process-wide state (the OTLP/HTTP exporter's client), made once here, before any
  // thread starts, as libcurl asks; the decision path never touches libcurl.
  if (const CURLcode curl = curl_global_init(CURL_GLOBAL_DEFAULT); curl != CURLE_OK) {
    std::fprintf(stderr, "sluice: libcurl cannot start: %s\n", curl_easy_strerror(curl));
    return 1;
  }
  return sluice::RunProcess(loaded);
}
