// The process's settings as one plain value: what every part (config loader, backends, rate
// limiter, gRPC and HTTP servers, lifecycle) is built from. Each field is one flag of
// server/main.cc, which takes its default from here; the default and the meaning are written
// beside each field. Where the value came from (upstream's environment, SLUICE_* variables, the
// command line) is setting_flags.h's business; what is checked before anything starts is
// ValidateSettings below. server/process/part_options.h turns these into the parts' options.
//
// A plain value; ValidateSettings is a pure function, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/algorithm/algorithm.h"
#include "server/common/logging.h"
#include "server/config/failure_mode.h"
#include "server/key/upstream_key.h"

namespace sluice {

// Where limits are kept (--backend).
enum class BackendKind {
  kMemory,        // "memory": in this process
  kRedis,         // "redis": one standalone Redis, shared by every replica
  kRedisCluster,  // "redis_cluster": a Redis Cluster, shared by every replica
  kMemcached,     // "memcached": memcached servers, shared by every replica (fixed windows only)
};
// "memory", "redis", "redis_cluster", "memcached": as written in the flags.
absl::string_view BackendKindName(BackendKind kind);

// The clock Redis decisions are made on (--redis_clock).
enum class RedisClockSource {
  kRedis,  // "redis": Redis' clock, one for all replicas (sampled with TIME every second)
  kLocal,  // "local": this process's clock; replicas must agree (NTP)
};
absl::string_view RedisClockSourceName(RedisClockSource source);

// Where the rules come from (--config_source).
enum class ConfigSourceKind {
  kFiles,  // "files": --config, watched for changes
  kXds,    // "xds": a management server, over an xDS stream (state of the world, ADS)
};
absl::string_view ConfigSourceKindName(ConfigSourceKind source);

// The management server of --config_source=xds (envoyproxy/ratelimit's CONFIG_GRPC_XDS_* and
// XDS_CLIENT_* variables; their defaults are upstream's).
struct XdsSettings {
  // --xds_server: HOST:PORT (or any gRPC target) of the management server.
  std::string server = "localhost:18000";
  // --xds_node_id: the Node id the server keys its snapshots by.
  std::string node_id = "default";
  // --xds_node_metadata: "key=value,key2=value2": string fields of the Node's metadata.
  std::vector<std::pair<std::string, std::string>> node_metadata;
  // --xds_headers: "name:value,name2:value2": gRPC metadata sent on the stream.
  std::vector<std::pair<std::string, std::string>> headers;
  // --xds_tls: TLS to the server; --xds_tls_ca: the PEM bundle its certificate must chain to
  // (empty: the system's roots); --xds_tls_cert and --xds_tls_key: this client's certificate
  // (mutual TLS), both or neither; --xds_tls_server_name: the name the server's certificate
  // must hold, in place of the host of --xds_server. The files are read at each connection.
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  // --xds_connect_retry_interval: the wait between attempts while the server cannot be
  // reached (randomized by half either way). > 0.
  absl::Duration connect_retry_interval = absl::Seconds(3);
  // --xds_backoff_initial, --xds_backoff_max: after an established stream breaks, the first wait
  // before connecting again, doubling per failure up to the max. > 0, initial <= max.
  absl::Duration backoff_initial = absl::Seconds(10);
  absl::Duration backoff_max = absl::Seconds(60);
  // --xds_backoff_random_factor: with --xds_backoff_jitter, each wait is randomized by this
  // share either way. 0 to 1.
  double backoff_random_factor = 0.5;
  bool backoff_jitter = true;
  // --xds_max_message_bytes: the largest response accepted (0: gRPC's default, 4 MiB). >= 0.
  int64_t max_message_bytes = 0;
};

struct LogSettings {
  LogLevel level = LogLevel::kInfo;     // --log_level: debug, info, warning or error
  LogFormat format = LogFormat::kText;  // --log_format: text, or json (one object a line)
};

// Where the rules come from, what reading them may cost, and how changes are seen.
struct ConfigSettings {
  // --config_source.
  ConfigSourceKind source = ConfigSourceKind::kFiles;
  // The management server, with --config_source=xds.
  XdsSettings xds;
  // --config: a YAML file, or a directory of them (one domain each). Required with
  // --config_source=files; not read with xds.
  std::string path;
  // --default_config: what --config becomes when nothing names the rules (no --config, not
  // xds) and none of envoyproxy/ratelimit's variables is set (flag_layers.h decides). The
  // image sets it (SLUICE_DEFAULT_CONFIG=/etc/sluice/config) in place of a default command, so
  // that the image run with no command and upstream's variables reads them as upstream's does.
  std::string default_path;
  // --config_recursive: read `path` as envoyproxy/ratelimit's runtime directory (every file of
  // any name below it, ".." names skipped).
  bool recursive = false;
  // --config_ignore_dot_files: with `recursive`, also skip names starting with '.'.
  bool ignore_dot_files = true;
  // --merge_domain_config: several files may define one domain; their descriptors merge.
  bool merge_domains = false;
  // --strict_config: refuse what envoyproxy/ratelimit loads leniently (one of its keys out of
  // place, a key given twice, a null boolean or number, a second YAML document; an unknown
  // metadata.sluice key over xDS) instead of loading it with a warning.
  bool strict = false;
  // --config_max_file_bytes: a file larger than this is refused before it is parsed. >= 1.
  int64_t max_file_bytes = int64_t{4} << 20;
  // --config_max_nodes: YAML nodes over all files, each alias counted as its anchor's whole
  // content every time it is used. >= 1.
  int64_t max_nodes = 1'000'000;
  // --config_max_scalar_bytes: bytes of YAML keys and values, aliases counted the same. >= 1.
  int64_t max_scalar_bytes = int64_t{32} << 20;
  // --force_start_without_initial_config: serve even if the config cannot be loaded at start
  // (calls fail UNAVAILABLE until a valid one is); otherwise a bad config at start is fatal.
  // With xds: serve at once; otherwise nothing is served until the server's first valid
  // snapshot.
  bool force_start_without_initial_config = false;
  // --config_poll_interval: how often the files are checked for changes (0: never; SIGHUP
  // and --config_watch still reload).
  absl::Duration poll_interval = absl::Seconds(5);
  // --config_watch: reload as soon as inotify sees a change under `path`.
  bool watch = true;
};

struct GrpcSettings {
  // --grpc_address: HOST:PORT (port 0: any free one), unix:PATH or unix-abstract:NAME.
  std::string address = "0.0.0.0:8081";
  // --tls_cert, --tls_key: PEM certificate chain and its key; both or neither (plaintext).
  std::string tls_cert;
  std::string tls_key;
  // --tls_client_ca: mutual TLS; clients must present a certificate this PEM bundle signed.
  std::string tls_client_ca;
  // --tls_client_san: with mutual TLS, the client certificate must also hold this name among
  // its subject alternative names (a DNS name, wildcards in the certificate matching one label;
  // or an IP address), as envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN. Empty: any name.
  std::string tls_client_san;
  // --tls_reload_interval: how often the TLS files are re-read (at least 1s with TLS).
  absl::Duration tls_reload_interval = absl::Seconds(10);
  // --rlqs: serve the Rate Limit Quota Service on the same listener.
  bool rlqs = true;
  // --rlqs_rebalance_interval: how often every bucket's shares are recomputed (at least 100ms).
  absl::Duration rlqs_rebalance_interval = absl::Seconds(1);
  // --rlqs_max_streams, --rlqs_max_buckets_per_stream: bounds (at least 1).
  int64_t rlqs_max_streams = 10000;
  int64_t rlqs_max_buckets_per_stream = 10000;
  // --rlqs_max_subscriptions: (stream, bucket) pairs held in all (at least 1).
  int64_t rlqs_max_subscriptions = 1000000;
  // --rlqs_max_streams_per_peer: streams of one client address (at least 1).
  int64_t rlqs_max_streams_per_peer = 100;
  // --rlqs_max_mib, --rlqs_max_peer_mib, --rlqs_max_stream_mib: RLQS state in all, per client
  // address and per stream (at least 1).
  int64_t rlqs_max_mib = 256;
  int64_t rlqs_max_peer_mib = 64;
  int64_t rlqs_max_stream_mib = 16;
  // --rlqs_max_pending_kib: responses waiting behind a stream's write in flight (at least 64).
  int64_t rlqs_max_pending_kib = 16384;
  // --rlqs_max_pending_mib: responses waiting (and in flight) in all streams (at least 1).
  int64_t rlqs_max_pending_mib = 64;
  // --rlqs_write_timeout: a response not read for this long cancels its stream (at least 1s).
  absl::Duration rlqs_write_timeout = absl::Seconds(10);
  // --rlqs_newcomer_waits: a new subscriber of a bucket whose shares are held waits for the
  // next rebalance with the room left (DENY_ALL when none), instead of its fair share at once.
  bool rlqs_newcomer_waits = false;
  // --rlqs_page_values: GET /rlqs shows descriptor values as sent (else redacted).
  bool rlqs_page_values = false;
  // --grpc_max_connection_age: a client connection older than this is sent a GOAWAY, so that
  // the client reconnects (spreading long-lived connections over new replicas after a
  // scale-out); gRPC adds a jitter of +/-10% per connection. 0: never. >= 0. Longer than gRPC's
  // int milliseconds can say (about 24.8 days) is held to that.
  absl::Duration max_connection_age = absl::ZeroDuration();
  // --grpc_max_connection_age_grace: how long calls still running on a connection sent that
  // GOAWAY may take before the connection is closed under them. 0: as long as they take. >= 0.
  absl::Duration max_connection_age_grace = absl::ZeroDuration();
};

struct HttpSettings {
  // --http_address: HOST:PORT of /json, /healthz, /healthcheck, /readyz, /config, /metrics.
  std::string address = "0.0.0.0:8080";
  // --debug_address: a second listener with the same endpoints; empty: none.
  std::string debug_address;
  // --debug_address_required: a --debug_address that cannot be listened on stops the start;
  // false: a warning, and the start goes on without it (envoyproxy/ratelimit's debug listener,
  // whose failure it only logs; its variables set this false).
  bool debug_address_required = true;
  // --http_max_connections: most connections at once over both addresses (lowered at start to
  // half the file-descriptor limit). >= 1.
  int32_t max_connections = 1024;
  // --http_request_timeout: a request not whole this long after its connection's accept (or,
  // keep-alive, its first byte) is dropped. >= 1ms.
  absl::Duration request_timeout = absl::Seconds(10);
  // --http_answer_timeout: an answer not read whole this long after it was handed over closes
  // its connection (a slow reader is cut off). >= 1ms. Also the Prometheus listener's.
  absl::Duration answer_timeout = absl::Seconds(30);
  // --config_dump_max_bytes: largest /config page; longer ones are cut at a line. >= 1.
  int64_t config_dump_max_bytes = 4 << 20;
  // --metrics_max_page_bytes: largest /metrics page (and upstream's names' page); per-rule
  // series past it are left out. >= 64 KiB.
  int64_t metrics_max_page_bytes = 16 << 20;
};

// envoyproxy/ratelimit's Prometheus surface (its USE_PROMETHEUS): upstream's metric names,
// statsd names mapped by a statsd_exporter mapping, on a listener of their own.
struct PrometheusSettings {
  // --prometheus_address: HOST:PORT to serve them on; empty: not served.
  std::string address;
  // --prometheus_path: the path served there. Starts with '/'.
  std::string path = "/metrics";
  // --prometheus_mapper: a statsd_exporter mapping file; empty: the built-in mapping (the rules
  // of upstream's default one).
  std::string mapper;
  // --prometheus_response_time_ms: the built-in mapping leaves response times in milliseconds
  // (upstream's PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS); no effect with a mapping file.
  bool response_time_ms = false;
};

// A DogStatsD mogrifier (envoyproxy/ratelimit's DOG_STATSD_MOGRIFIER_<ID>_PATTERN, _NAME,
// _TAGS): server/stats/statsd_mogrifier.h says how it applies.
struct StatsdMogrifierSettings {
  std::string id;  // names it in messages
  std::string pattern;
  std::string name;
  // Key and value template of each tag, in order.
  std::vector<std::pair<std::string, std::string>> tags;
};

// envoyproxy/ratelimit's statsd and DogStatsD sinks (its USE_STATSD, on by default under its
// variables, and USE_DOG_STATSD): upstream's statsd names, read from Sluice's counters and sent
// every flush interval (server/stats/statsd_sink.h).
struct StatsdSettings {
  enum class Protocol { kUdp, kTcp };
  // --statsd_address: HOST:PORT to send to; empty: off.
  std::string address;
  // --statsd_protocol: udp or tcp (upstream's plain statsd sink, gostats, sends over tcp unless
  // STATSD_PROTOCOL says udp; its DogStatsD client over udp).
  Protocol protocol = Protocol::kUdp;
  // --statsd_dogstatsd: DogStatsD lines, tags after "|#", and the mogrifiers.
  bool dogstatsd = false;
  // --statsd_flush_interval: how often counts are sent (STATS_FLUSH_INTERVAL). >= 1ms.
  absl::Duration flush_interval = absl::Seconds(10);
  // --statsd_extra_tags: "key:value,..." on every name (EXTRA_TAGS): serialized into the name as
  // gostats does (".__key=value"), or DogStatsD tags.
  std::vector<std::pair<std::string, std::string>> extra_tags;
  // --statsd_dogstatsd_tags: tags sent as given, first, on every DogStatsD line (the DD_ENV,
  // DD_SERVICE, DD_VERSION and DD_ENTITY_ID tags upstream's Datadog client adds).
  std::vector<std::string> dogstatsd_tags;
  // --statsd_mogrifiers: DogStatsD mogrifiers, first match wins.
  std::vector<StatsdMogrifierSettings> mogrifiers;
};

// One Redis: the main one or the per-second one.
struct RedisTargetSettings {
  // --redis_addresses / --redis_per_second_addresses, split at commas: a standalone Redis
  // takes one HOST:PORT (or unix:PATH); a cluster takes seed nodes. Not used with `sentinels`.
  std::vector<std::string> addresses;
  // --redis_username / --redis_per_second_username: ACL user (needs the password).
  std::string username;
  // --redis_password / --redis_per_second_password: AUTH password.
  std::string password;
  // --redis_connections / --redis_per_second_connections: per I/O thread. >= 1.
  int32_t connections = 2;
  // --redis_tls / --redis_per_second_tls: TLS to this Redis (every node of a cluster alike;
  // with Sentinel, the sentinels and the master), set up by RedisSettings' tls_* fields. Needs
  // TCP addresses, not unix:PATH.
  bool tls = false;
  // Redis Sentinel, for a standalone Redis only. --redis_sentinels /
  // --redis_per_second_sentinels, split at commas: HOST:PORT of each sentinel. Non-empty: the
  // master is whichever the sentinels name for `sentinel_master`, followed through failovers,
  // and `addresses` is not used (setting_flags.h refuses the addresses flag given beside it).
  std::vector<std::string> sentinels;
  // --redis_sentinel_master / --redis_per_second_sentinel_master: the master's name as the
  // sentinels know it (`sentinel monitor <name> ...`); needed with `sentinels`, and only then.
  std::string sentinel_master;
  // --redis_sentinel_username, --redis_sentinel_password (and the per-second twins): AUTH to
  // the sentinels; the master keeps `username` and `password`. The username needs the password.
  std::string sentinel_username;
  std::string sentinel_password;
};

// What the main and the per-second Redis share.
struct RedisSettings {
  // --redis_db: database number; a cluster has only 0.
  int32_t db = 0;
  // --redis_timeout: per-decision budget; past it the failure mode answers. > 0.
  absl::Duration timeout = absl::Milliseconds(10);
  // --redis_queue_grace: time a decision waits inside Sluice before its call is written that
  // is not charged to `timeout`, per wait. >= 0.
  absl::Duration queue_grace = absl::Milliseconds(1);
  // --redis_clock.
  RedisClockSource clock = RedisClockSource::kRedis;
  // --redis_io_threads. >= 1.
  int32_t io_threads = 1;
  // --redis_max_batch: standalone Redis: most lone checks of one algorithm one script call
  // decides (1: each request's checks alone). >= 1.
  int32_t max_batch = 16;
  // --redis_lease_rate: decisions a second of one key on one replica that make it hot, so that
  // the replica takes leases of its units (server/backend/lease_table.h): token buckets, GCRA,
  // fixed windows. 0: no leases. >= 0.
  double lease_rate = 0;
  // --redis_lease_window: a lease is this long of the key's rate on the replica. > 0.
  absl::Duration lease_window = absl::Milliseconds(20);
  // --redis_lease_life: a lease's unused units go back this long after its last grant. > 0.
  absl::Duration lease_life = absl::Milliseconds(100);
  // --redis_lease_max_share: the replicas together hold at most this share of a hot key's
  // remaining budget. In (0, 1].
  double lease_max_share = 0.5;
  // --redis_caller_writes: a request thread writes its commands itself onto an idle
  // connection (false: the I/O thread writes every command).
  bool caller_writes = true;
  // --redis_breaker_failures: failed calls in a row to one node that open its circuit
  // breaker (0: no breaker). >= 0.
  int32_t breaker_failures = 5;
  // --redis_breaker_open: the longest wait between probes of a node whose breaker is open. > 0.
  absl::Duration breaker_open = absl::Seconds(1);
  // --redis_breaker_open_min: the wait before the first probe. > 0.
  absl::Duration breaker_open_min = absl::Milliseconds(50);
  // One TLS setup for whichever Redis has `tls` on (as upstream shares its REDIS_TLS_* files
  // between its two pools); each of these needs --redis_tls or --redis_per_second_tls.
  // --redis_tls_ca: a PEM bundle trusted besides the system's roots (empty: the system's only).
  std::string tls_ca;
  // --redis_tls_cert, --redis_tls_key: this client's PEM certificate chain and its key, for a
  // Redis that asks for one (`tls-auth-clients yes`); both or neither.
  std::string tls_cert;
  std::string tls_key;
  // --redis_tls_server_name: the name sent as SNI and checked in the server's certificate, in
  // place of each node's host (empty: the host, or for an IP address the certificate's IPs).
  std::string tls_server_name;
  // --redis_tls_skip_hostname_verification: the certificate chain is still verified, the name
  // in it is not (upstream's REDIS_TLS_SKIP_HOSTNAME_VERIFICATION, for servers such as GCP
  // Memorystore whose certificates do not name the address clients use).
  bool tls_skip_hostname_verification = false;
  // --redis_key_layout: the keys of lone fixed windows (KeyLayout): Sluice's, or
  // envoyproxy/ratelimit's, which upstream's replicas on the same Redis share during a
  // migration (upstream's variables select it).
  KeyLayout key_layout = KeyLayout::kSluice;
  // --redis_expiration_jitter: with --redis_key_layout=upstream, a window key's TTL is lengthened
  // by up to this, whole seconds at random (upstream's EXPIRATION_JITTER_MAX_SECONDS). >= 0.
  absl::Duration expiration_jitter = absl::ZeroDuration();
};

// The memcached servers of --backend=memcached (envoyproxy/ratelimit's MEMCACHE_* variables).
// The budget, the breaker and the I/O threads are RedisSettings' (--redis_timeout,
// --redis_breaker_*, --redis_io_threads, --redis_queue_grace): one failure policy for both.
struct MemcachedSettings {
  // --memcached_servers, split at commas: HOST:PORT (or unix:PATH) of each server, in the order
  // keys are placed over them (upstream's MEMCACHE_HOST_PORT). Not with `srv`.
  std::vector<std::string> servers;
  // --memcached_srv: a DNS SRV name, _service._proto.name, whose targets are the servers
  // (sorted, as upstream sorts them). Not with `servers`.
  std::string srv;
  // --memcached_srv_refresh: how often the SRV name is looked up again; 0: only at start. >= 0.
  absl::Duration srv_refresh = absl::ZeroDuration();
  // --memcached_connections: connections to each server (upstream's MEMCACHE_MAX_IDLE_CONNS,
  // its pool of idle connections per server). >= 1.
  int32_t connections = 2;
  // --memcached_tls and its files (upstream's MEMCACHE_TLS, MEMCACHE_TLS_CACERT,
  // _CLIENT_CERT, _CLIENT_KEY, _SKIP_HOSTNAME_VERIFICATION): as the --redis_tls_* ones.
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  bool tls_skip_hostname_verification = false;
};

struct BackendSettings {
  // The main Redis's defaults: --redis_addresses=127.0.0.1:6379.
  static RedisTargetSettings DefaultRedis() {
    RedisTargetSettings redis;
    redis.addresses = {"127.0.0.1:6379"};
    return redis;
  }

  // --backend.
  BackendKind kind = BackendKind::kMemory;
  // The main Redis (kind redis or redis_cluster).
  RedisTargetSettings redis = DefaultRedis();
  // --redis_per_second_backend: a second Redis (redis or redis_cluster, never memory) for
  // rules with a one-second period; nullopt (the flag empty): none. Needs a Redis `kind`.
  std::optional<BackendKind> per_second_kind;
  RedisTargetSettings per_second;
  RedisSettings shared;
  // --backend=memcached.
  MemcachedSettings memcached;
  // --memory_max_keys: memory backend, and the failure_mode local store: most keys kept
  // (values below 1 count as 1).
  int64_t memory_max_keys = 1'000'000;
  // --memory_max_mib: the same two stores (each): most heap, in MiB. 1 to kMaxMib.
  int64_t memory_max_mib = 1024;
};

struct LimiterSettings {
  // --max_descriptors, --max_entries, --max_key_bytes: what one request may hold. >= 1 each.
  int32_t max_descriptors = 64;
  int32_t max_entries = 32;
  int32_t max_key_bytes = 1024;
  // --redis_key_prefix: prefix of every storage key.
  std::string key_prefix = "sluice:";
  // --failure_mode: what answers when the backend cannot in budget (a domain's overrides).
  FailureMode failure_mode = FailureMode::kAllow;
  // --replicas_hint: failure_mode local: replicas sharing the backend. >= 1.
  int32_t replicas_hint = 1;
  // --over_limit_cache_keys: Redis backends: keys remembered as over limit (0 disables).
  int64_t over_limit_cache_keys = 100'000;
  // --over_limit_cache_max_mib: the cache's heap bound, in MiB. 1 to kMaxMib.
  int64_t over_limit_cache_max_mib = 64;
  // --max_rule_metric_series: stat keys with counters of their own (values below 1 count
  // as 1).
  int64_t max_rule_metric_series = 10'000;
  // --rule_metric_ttl: a per-rule series unused this long is dropped; 0: never. >= 0.
  absl::Duration rule_metric_ttl = absl::Minutes(10);
  // --near_limit_ratio: share of a rule's capacity past which hits count as near_limit.
  // 0 to 1.
  double near_limit_ratio = 0.8;
  // --shadow_mode: every request over limit is answered OK (statuses still say OVER_LIMIT).
  bool shadow_mode = false;
  // --quota_mode: every descriptor is in quota mode.
  bool quota_mode = false;
  // --response_dynamic_metadata: the response's dynamic metadata describes the request.
  bool response_dynamic_metadata = false;
  // --rate_limit_headers and the three header names.
  bool rate_limit_headers = false;
  std::string limit_header = "RateLimit-Limit";
  std::string remaining_header = "RateLimit-Remaining";
  std::string reset_header = "RateLimit-Reset";
  // --ietf_rate_limit_headers: RateLimit-Policy and RateLimit (IETF draft).
  bool ietf_rate_limit_headers = false;
  // --retry_after_header: retry-after on OVER_LIMIT answers.
  bool retry_after_header = true;
  // --default_charge: whether a denied request's hits are charged, for the rules that do not
  // say (`charge:`). LimitParams::charge.
  Charge default_charge = Charge::kIfAdmitted;
  // --default_charge_fixed_window: the same for fixed-window rules (and descriptors' limit
  // overrides, which are fixed windows); unset, --default_charge. Upstream's environment sets it
  // (envoyproxy/ratelimit has only fixed windows).
  std::optional<Charge> default_charge_fixed_window;
  // --count_denied_hits: the older name of --default_charge=always; true wins.
  bool count_denied_hits = false;
  // --refuse_refunds: domains whose refunds (is_negative_hits) are refused ("*": every domain);
  // empty, every refund is applied.
  std::vector<std::string> refuse_refunds;
  // --request_all_or_nothing: a request answered OVER_LIMIT consumes nothing: what its admitted
  // descriptors took is given back (upstream's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true).
  bool request_all_or_nothing = false;
  // --calendar_months: fixed-window rules and overrides of unit month count calendar months
  // (UTC, reset at 00:00 on the 1st) instead of 30 days (upstream's
  // USE_CALENDAR_MONTH_RATE_LIMIT).
  bool calendar_months = false;
};

// Traces of decisions, exported over OTLP (envoyproxy/ratelimit's TRACING_* and the standard
// OTEL_EXPORTER_OTLP_* and OTEL_BSP_* variables map onto these; docs/tracing.md).
enum class TracingProtocol {
  kHttp,  // "http": OTLP/HTTP, protobuf body, POST to the traces URL (upstream's default)
  kGrpc,  // "grpc": OTLP/gRPC, TraceService/Export
};
absl::string_view TracingProtocolName(TracingProtocol protocol);
// "udp" or "tcp", as --statsd_protocol reads it.
absl::string_view StatsdProtocolName(StatsdSettings::Protocol protocol);

struct TracingSettings {
  // --tracing: export spans. Off: no span is made and nothing is sent.
  bool enabled = false;
  // --tracing_protocol.
  TracingProtocol protocol = TracingProtocol::kHttp;
  // --tracing_endpoint: where spans go. http: the full URL of the traces resource
  // (http[s]://HOST:PORT/PATH); grpc: http[s]://HOST:PORT, or HOST:PORT (then TLS unless
  // --tracing_insecure). Empty: the protocol's default, http://localhost:4318/v1/traces or
  // http://localhost:4317.
  std::string endpoint;
  // --tracing_insecure: grpc with an endpoint without a scheme: plaintext.
  bool insecure = false;
  // --tracing_headers: "name=value,name2=value2": sent with every export (e.g. an API key).
  std::vector<std::pair<std::string, std::string>> headers;
  // --tracing_ca: PEM bundle an https collector's certificate must chain to (empty: the
  // system's roots).
  std::string ca;
  // --tracing_timeout: the most one export may take. > 0.
  absl::Duration timeout = absl::Seconds(10);
  // --tracing_sampling_rate: share of calls traced when the caller did not decide (a caller's
  // sampled flag is followed). 0 to 1.
  double sampling_rate = 1.0;
  // --tracing_service_name, --tracing_service_namespace, --tracing_service_instance_id: the
  // resource's service.name, service.namespace and service.instance.id (empty instance id: a
  // random UUID made at start).
  std::string service_name = "sluice";
  std::string service_namespace;
  std::string service_instance_id;
  // --tracing_descriptor_values: descriptor entries' values on the decision span (they can be
  // user identifiers; by default only their keys are).
  bool descriptor_values = false;
  // --tracing_max_queue_spans: spans waiting for export at most; more are dropped and counted
  // (sluice_tracing_spans_dropped_total). >= 1.
  int32_t max_queue_spans = 2048;
  // --tracing_max_export_spans: the most spans one export carries. 1 to max_queue_spans.
  int32_t max_export_spans = 512;
  // --tracing_export_interval: the longest a span waits before its export starts. > 0.
  absl::Duration export_interval = absl::Seconds(5);
};

// Health at start while the backend has never answered (envoyproxy/ratelimit's
// REDIS_STARTUP_* variables; their defaults are upstream's). Checked on a jittered exponential
// schedule: the first check as soon as the listeners are up, then after waits drawn uniformly
// from [initial_interval, initial_interval * 2^n), held within [initial_interval, max_interval]
// (upstream's jpillora/backoff with Factor 2 and Jitter).
struct BackendWaitSettings {
  // --wait_for_backend: health (gRPC and /healthcheck) answers unhealthy until every backend has
  // answered once (the memory backend at once); then the failure policy decides while one is
  // away, and health no longer follows the backend. Calls are answered meanwhile, by the
  // failure policy. False: health does not wait for the backend.
  bool enabled = false;
  // --wait_for_backend_initial_interval, --wait_for_backend_max_interval: the schedule above.
  // > 0 each; an initial interval above the max makes every wait the max.
  absl::Duration initial_interval = absl::Seconds(1);
  absl::Duration max_interval = absl::Seconds(30);
  // --wait_for_backend_max_elapsed: a check that finds a backend still silent this long after
  // it began connecting stops the process (exit status 1). 0: wait forever. >= 0.
  absl::Duration max_elapsed = absl::ZeroDuration();
};

// The admin API: POST /admin/inspect and /admin/reset on the HTTP listeners
// (server/service/admin_service.h, docs/operations.md "Resetting and inspecting counters").
struct AdminSettings {
  // --admin_api: serve it. Off: /admin/* answers 404 naming this flag.
  bool enabled = false;
  // --admin_token_file: a file holding the bearer token every admin call must present (read
  // once at start, surrounding whitespace trimmed). Empty: no token, which ValidateSettings
  // allows only while --http_address and --debug_address are loopback addresses.
  std::string token_file;
};

struct Settings {
  // --check_config: load and validate the config, print it, exit 0 or 1; serve nothing.
  bool check_config = false;
  // --healthy_with_at_least_one_config_loaded: health (gRPC and /healthcheck) answers
  // unhealthy while the config in force has no domain.
  bool healthy_requires_config = false;
  // --shutdown_grace: on SIGTERM/SIGINT, how long in-flight calls may take.
  absl::Duration shutdown_grace = absl::Seconds(10);
  BackendWaitSettings wait_for_backend;
  LogSettings log;
  ConfigSettings config;
  GrpcSettings grpc;
  HttpSettings http;
  PrometheusSettings prometheus;
  StatsdSettings statsd;
  BackendSettings backend;
  LimiterSettings limiter;
  TracingSettings tracing;
  AdminSettings admin;
};

// The largest --memory_max_mib and --over_limit_cache_max_mib: 1 TiB, far above any machine's
// share for them and far from overflowing when turned into bytes.
inline constexpr int64_t kMaxMib = int64_t{1} << 20;
// The smallest --metrics_max_page_bytes.
inline constexpr int64_t kMinMetricsPageBytes = int64_t{64} << 10;

// One thing wrong with the settings.
struct SettingError {
  // The flags the error is about, without dashes; the first is the one at fault.
  std::vector<std::string> flags;
  // What is wrong, naming the flag(s): "--replicas_hint must be at least 1".
  std::string message;
};

// Everything wrong with `settings`, in a fixed order (empty: nothing). Checks values only: it
// opens no file, resolves no name and binds nothing (files, addresses in use and Redis are the
// parts' to report when they start).
std::vector<SettingError> ValidateSettings(const Settings& settings);

}  // namespace sluice
