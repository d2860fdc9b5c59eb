// sluice: the rate-limit decision server. The only place that builds the real object graph:
// flags -> config -> backend -> rate limiter -> gRPC and HTTP servers; then waits for signals
// (SIGHUP reloads the config, SIGTERM/SIGINT drain and exit 0).
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/backend/memory_backend.h"
#include "server/backend/per_second_backend.h"
#include "server/backend/redis_backend.h"
#include "server/common/clock.h"
#include "server/common/env_flags.h"
#include "server/common/logging.h"
#include "server/config/config_loader.h"
#include "server/config/config_notifier.h"
#include "server/config/config_store.h"
#include "server/config/config_watcher.h"
#include "server/config/failure_mode.h"
#include "server/service/grpc_options.h"
#include "server/service/grpc_service.h"
#include "server/redis/sha1.h"
#include "server/service/grpc_tls.h"
#include "server/service/http_server.h"
#include "server/service/metrics.h"
#include "server/service/rate_limiter.h"
#include "server/settings/upstream_env.h"

ABSL_FLAG(std::string, config, "", "YAML config file, or a directory of *.yaml files (one domain each)");
ABSL_FLAG(std::string, grpc_address, "0.0.0.0:8081", "gRPC listen address (HOST:PORT)");
ABSL_FLAG(std::string, tls_cert, "",
          "gRPC over TLS: PEM certificate chain file (with --tls_key); empty: plaintext");
ABSL_FLAG(std::string, tls_key, "", "gRPC over TLS: PEM private key file of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "mutual TLS: PEM CA bundle; clients must present a certificate it signed");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(10),
          "how often the TLS files are re-read, so that a rotated certificate is served to new "
          "connections without a restart");
ABSL_FLAG(std::string, http_address, "0.0.0.0:8080",
          "HTTP listen address for /json, /healthz, /healthcheck, /readyz, /config, /rlconfig, "
          "/metrics (HOST:PORT)");
ABSL_FLAG(std::string, debug_address, "",
          "a second HTTP listen address with the same endpoints (envoyproxy/ratelimit's debug "
          "port, where it serves /rlconfig and stats); empty: none");
ABSL_FLAG(std::string, backend, "memory",
          "where limits are kept: memory (in process), redis or redis_cluster (shared by every "
          "replica)");
ABSL_FLAG(std::string, redis_addresses, "127.0.0.1:6379",
          "redis: the server, HOST:PORT; redis_cluster: seed nodes, HOST:PORT,HOST:PORT,...");
ABSL_FLAG(std::string, redis_username, "", "Redis ACL user (with --redis_password)");
ABSL_FLAG(std::string, redis_password, "", "Redis password (AUTH)");
ABSL_FLAG(int32_t, redis_db, 0, "Redis database number (standalone only)");
ABSL_FLAG(std::string, redis_key_prefix, "sluice:", "prefix of every key Sluice writes");
ABSL_FLAG(absl::Duration, redis_timeout, absl::Milliseconds(10),
          "per-decision budget; past it the decision follows the failure mode (--failure_mode, "
          "or the domain's failure_mode:)");
ABSL_FLAG(absl::Duration, redis_queue_grace, absl::Milliseconds(1),
          "time a decision waits inside Sluice before its Redis call is written (for an I/O "
          "thread, or behind a lane's calls) that is not charged to --redis_timeout, per wait; "
          "a decision answers within the budget plus at most twice this");
ABSL_FLAG(std::string, redis_clock, "redis",
          "redis: Redis' clock, one for all replicas (this process's clock plus an offset "
          "sampled with TIME every second); local: this process's clock (replicas must agree)");
ABSL_FLAG(int32_t, redis_io_threads, 1, "Redis I/O threads");
ABSL_FLAG(int32_t, redis_connections, 2, "Redis connections per I/O thread");
ABSL_FLAG(int32_t, redis_max_batch, 16,
          "redis: most lone checks of one algorithm, from any requests, decided by one script "
          "call (1: each request's checks on their own); ignored by redis_cluster");
ABSL_FLAG(bool, redis_caller_writes, true,
          "a request thread writes its Redis commands itself when the connection is idle, "
          "sparing the I/O thread a wake-up (false: the I/O thread writes every command)");
ABSL_FLAG(int64_t, max_rule_metric_series, 10000,
          "stat keys with per-rule counters of their own (detailed_metric rules and limit "
          "overrides make one per request value); past it they count under key=\"_folded\"");
ABSL_FLAG(int32_t, redis_breaker_failures, 5,
          "after this many Redis calls in a row to one node fail (timeout, connection), its "
          "decisions go to --failure_mode at once until a probe of Sluice's own (a PING) is "
          "answered; 0: no circuit breaker");
ABSL_FLAG(absl::Duration, redis_breaker_open, absl::Seconds(1),
          "the longest a node's open circuit breaker answers by --failure_mode before Sluice "
          "probes the node again (each failed probe doubles the wait from "
          "--redis_breaker_open_min)");
ABSL_FLAG(absl::Duration, redis_breaker_open_min, absl::Milliseconds(50),
          "how long a node's circuit breaker stays open before the first probe (a PING)");
ABSL_FLAG(std::string, redis_per_second_backend, "",
          "a second Redis for rules with a one-second period (envoyproxy/ratelimit's "
          "REDIS_PERSECOND): redis or redis_cluster; empty: none");
ABSL_FLAG(std::string, redis_per_second_addresses, "",
          "--redis_per_second_backend's address(es), as --redis_addresses");
ABSL_FLAG(std::string, redis_per_second_username, "", "ACL user of the per-second Redis");
ABSL_FLAG(std::string, redis_per_second_password, "", "password of the per-second Redis");
ABSL_FLAG(int32_t, redis_per_second_connections, 2,
          "per-second Redis connections per I/O thread");
ABSL_FLAG(int64_t, over_limit_cache_keys, 100000,
          "redis backend: keys remembered as over limit, answered without a Redis call until "
          "their retry time (0 disables)");
ABSL_FLAG(std::string, failure_mode, "allow",
          "when the backend cannot answer in budget: allow (answer OK), deny (OVER_LIMIT) or "
          "local (decide in process on this replica's share of each limit, see "
          "--replicas_hint); a domain's failure_mode: overrides it");
ABSL_FLAG(int32_t, replicas_hint, 1,
          "failure_mode local: the number of Sluice replicas sharing the Redis; each admits "
          "1/replicas_hint of a rule's limit and burst, rounded up (a rule's local_share "
          "overrides)");
ABSL_FLAG(bool, check_config, false, "validate the config, print the result and exit 0 or 1");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(std::string, log_format, "text",
          "text, or json (one object a line: @timestamp, level, caller, @message)");
ABSL_FLAG(bool, config_recursive, false,
          "read --config as envoyproxy/ratelimit's runtime directory: every file of any name "
          "below it, subdirectories too (..data and other .. names of a ConfigMap skipped)");
ABSL_FLAG(bool, config_ignore_dot_files, true,
          "with --config_recursive: also skip files and directories whose names start with '.'");
ABSL_FLAG(bool, merge_domain_config, false,
          "several files may define one domain; their descriptors are merged");
ABSL_FLAG(bool, force_start_without_initial_config, false,
          "serve even if the config cannot be loaded at start (calls fail UNAVAILABLE until a "
          "valid one is loaded); otherwise a bad config at start is fatal");
ABSL_FLAG(bool, healthy_with_at_least_one_config_loaded, false,
          "/healthcheck and gRPC health answer unhealthy while the config has no domain");
ABSL_FLAG(double, near_limit_ratio, 0.8,
          "share of a rule's capacity past which hits count as near_limit in /metrics");
ABSL_FLAG(bool, shadow_mode, false,
          "global shadow mode: a request over limit is answered OK (statuses still say "
          "OVER_LIMIT; counted in sluice_global_shadow_mode_total)");
ABSL_FLAG(bool, quota_mode, false, "every descriptor is in quota mode (see quota_mode:)");
ABSL_FLAG(bool, response_dynamic_metadata, false,
          "the response's dynamic metadata describes the request and carries the metadata: of "
          "the descriptors that passed");
ABSL_FLAG(bool, rate_limit_headers, false,
          "add RateLimit-Limit, -Remaining and -Reset headers of the descriptor closest to its "
          "limit, as envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED does");
ABSL_FLAG(std::string, rate_limit_limit_header, "RateLimit-Limit",
          "name of the limit header (--rate_limit_headers)");
ABSL_FLAG(std::string, rate_limit_remaining_header, "RateLimit-Remaining",
          "name of the remaining header (--rate_limit_headers)");
ABSL_FLAG(std::string, rate_limit_reset_header, "RateLimit-Reset",
          "name of the reset header, whole seconds (--rate_limit_headers)");
ABSL_FLAG(bool, ietf_rate_limit_headers, false,
          "add RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers) "
          "of the descriptor closest to its limit, named by its rule's name or stat key");
ABSL_FLAG(bool, retry_after_header, true,
          "add a retry-after header (whole seconds, rounded up) to OVER_LIMIT answers");
ABSL_FLAG(bool, count_denied_hits, false,
          "a denied request's hits still count on a lone fixed-window rule, as in "
          "envoyproxy/ratelimit by default; false: a denied request consumes nothing");
ABSL_FLAG(int32_t, max_descriptors, 64, "most descriptors accepted in one request");
ABSL_FLAG(int32_t, max_entries, 32, "most entries accepted in one descriptor");
ABSL_FLAG(int32_t, max_key_bytes, 1024, "longest domain, descriptor key or value accepted");
ABSL_FLAG(int64_t, memory_max_keys, 1000000,
          "memory backend, and the failure_mode local store: most keys kept at once");
ABSL_FLAG(absl::Duration, config_poll_interval, absl::Seconds(5),
          "how often to check the config files for changes (0 disables; SIGHUP always reloads)");
ABSL_FLAG(bool, config_watch, true,
          "reload as soon as the config files change (inotify on --config's directory, a "
          "ConfigMap's ..data swap included), besides --config_poll_interval");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "on SIGTERM, how long in-flight calls may take before they are cancelled");

namespace sluice {
namespace {

// A short digest of what the config says (its rules and their files and lines), the same on
// every replica that loaded the same files: sluice_config_info{version}.
std::string ConfigVersion(const Config& config) { return Sha1Hex(config.Dump()).substr(0, 12); }

// Every flag this file defines, which SLUICE_<NAME> environment variables may set.
std::vector<std::string> OwnFlagNames() {
  std::vector<std::string> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), "server/main.cc")) {
      names.emplace_back(name);
    }
  }
  return names;
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "sluice: %s\n", message.c_str());
  std::exit(1);
}

// What the envoyproxy/ratelimit environment variables set, for the log once it is configured.
std::vector<std::string>& UpstreamNotes() {
  static auto* notes = new std::vector<std::string>();
  return *notes;
}
std::vector<std::string>& UpstreamWarnings() {
  static auto* warnings = new std::vector<std::string>();
  return *warnings;
}

// Sets flags from envoyproxy/ratelimit's environment variables (server/settings/upstream_env.h),
// before SLUICE_* variables and the command line, which win. A setting that cannot be honoured
// safely is an error naming it.
absl::Status ApplyUpstreamEnvironment() {
  UpstreamTranslation translation =
      TranslateUpstreamEnvironment([](absl::string_view name) -> std::optional<std::string> {
        const char* value = std::getenv(std::string(name).c_str());
        if (value == nullptr || *value == '\0') {
          return std::nullopt;
        }
        return std::string(value);
      });
  if (!translation.errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("envoyproxy/ratelimit settings Sluice cannot honour:\n  ",
                     absl::StrJoin(translation.errors, "\n  ")));
  }
  for (const FlagAssignment& assignment : translation.flags) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(assignment.flag);
    if (flag == nullptr) {
      return absl::InternalError(absl::StrCat(assignment.source, ": no flag --", assignment.flag));
    }
    std::string error;
    if (!flag->ParseFrom(assignment.value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(assignment.source, ": ", error));
    }
    const bool secret = absl::StrContains(assignment.flag, "password");
    UpstreamNotes().push_back(absl::StrCat("--", assignment.flag, "=",
                                           secret ? "(hidden)" : assignment.value, " from ",
                                           assignment.source));
  }
  UpstreamWarnings() = std::move(translation.warnings);
  return absl::OkStatus();
}

struct RedisTarget {
  std::string kind;  // redis | redis_cluster
  std::string addresses;
  std::string username;
  std::string password;
  int32_t connections = 2;
};

std::unique_ptr<RedisBackend> CreateRedisBackend(const RedisTarget& target, const Clock& clock,
                                                 const std::string& what) {
  RedisBackendOptions options;
  std::vector<std::string> addresses = absl::StrSplit(target.addresses, ',', absl::SkipEmpty());
  if (addresses.empty()) {
    Die(absl::StrCat(what, ": no address"));
  }
  options.cluster = target.kind == "redis_cluster";
  if (!options.cluster && addresses.size() > 1) {
    Die(absl::StrCat(what, ": a standalone Redis takes one HOST:PORT (redis_cluster takes "
                     "several seed nodes)"));
  }
  if (options.cluster && absl::GetFlag(FLAGS_redis_db) != 0) {
    Die("--redis_db: a Redis Cluster has only database 0");
  }
  if (target.connections < 1) {
    Die(absl::StrCat(what, ": connections must be at least 1"));
  }
  options.cluster_seeds = addresses;
  options.client.address = addresses.front();
  options.client.username = target.username;
  options.client.password = target.password;
  options.client.db = absl::GetFlag(FLAGS_redis_db);
  options.client.io_threads = absl::GetFlag(FLAGS_redis_io_threads);
  options.client.connections_per_thread = target.connections;
  if (!absl::GetFlag(FLAGS_redis_caller_writes)) {
    options.client.caller_write_horizon = absl::ZeroDuration();
  }
  options.client.breaker_failures = absl::GetFlag(FLAGS_redis_breaker_failures);
  options.client.breaker_open = absl::GetFlag(FLAGS_redis_breaker_open);
  options.client.breaker_open_min = absl::GetFlag(FLAGS_redis_breaker_open_min);
  options.client.queue_grace = absl::GetFlag(FLAGS_redis_queue_grace);
  options.timeout = absl::GetFlag(FLAGS_redis_timeout);
  options.use_caller_clock = absl::GetFlag(FLAGS_redis_clock) == "local";
  options.max_batch = static_cast<size_t>(absl::GetFlag(FLAGS_redis_max_batch));
  auto created = RedisBackend::Create(options, clock);
  if (!created.ok()) {
    Die(absl::StrCat(what, ": ", created.status().message()));
  }
  // Serve even if Redis is not up yet: decisions follow --failure_mode until it is.
  if (!(*created)->WaitUntilReady(absl::Seconds(2))) {
    SLUICE_LOG(WARNING) << what << " at " << target.addresses
                        << " is not reachable yet; answering by --failure_mode="
                        << absl::GetFlag(FLAGS_failure_mode)
                        << " (or the domain's failure_mode:) until it is";
  }
  return *std::move(created);
}

int Run() {
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    Die(absl::StrCat("--log_level: '", absl::GetFlag(FLAGS_log_level),
                     "' is not debug, info, warning or error"));
  }
  SetMinLogLevel(level);
  LogFormat format;
  if (!ParseLogFormat(absl::GetFlag(FLAGS_log_format), &format)) {
    Die(absl::StrCat("--log_format: '", absl::GetFlag(FLAGS_log_format), "' is not text or json"));
  }
  SetLogFormat(format);
  for (const std::string& note : UpstreamNotes()) {
    SLUICE_LOG(INFO) << "envoyproxy/ratelimit setting: " << note;
  }
  for (const std::string& warning : UpstreamWarnings()) {
    SLUICE_LOG(WARNING) << "envoyproxy/ratelimit setting not honoured: " << warning;
  }

  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) {
    Die("--config is required (a YAML file or a directory of them; or envoyproxy/ratelimit's "
        "RUNTIME_ROOT and friends)");
  }
  ConfigLoadOptions load_options;
  load_options.merge_domains = absl::GetFlag(FLAGS_merge_domain_config);
  load_options.recursive = absl::GetFlag(FLAGS_config_recursive);
  load_options.ignore_dot_files = absl::GetFlag(FLAGS_config_ignore_dot_files);
  auto loaded = LoadConfigPath(config_path, load_options);
  std::shared_ptr<const Config> config;
  if (loaded.ok()) {
    config = std::move(*loaded);
  } else if (absl::GetFlag(FLAGS_check_config) ||
             !absl::GetFlag(FLAGS_force_start_without_initial_config)) {
    Die(absl::StrCat("invalid config: ", loaded.status().message()));
  } else {
    SLUICE_LOG(ERROR) << "invalid config, serving without one until it is fixed "
                         "(--force_start_without_initial_config): "
                      << loaded.status().message();
  }
  if (absl::GetFlag(FLAGS_check_config)) {
    std::printf("config OK: %zu domains, %zu rules, %zu warnings\n", config->domains().size(),
                config->RuleCount(), config->warnings().size());
    for (const std::string& warning : config->warnings()) {
      std::printf("warning: %s\n", warning.c_str());
    }
    std::printf("%s", config->Dump().c_str());
    return 0;
  }
  if (config != nullptr) {
    for (const std::string& warning : config->warnings()) {
      SLUICE_LOG(WARNING) << "config: " << warning;
    }
  }
  const std::string backend_name = absl::GetFlag(FLAGS_backend);
  if (backend_name != "memory" && backend_name != "redis" && backend_name != "redis_cluster") {
    Die(absl::StrCat("--backend: '", backend_name, "' is not memory, redis or redis_cluster"));
  }
  const std::string per_second_name = absl::GetFlag(FLAGS_redis_per_second_backend);
  if (!per_second_name.empty() && per_second_name != "redis" &&
      per_second_name != "redis_cluster") {
    Die(absl::StrCat("--redis_per_second_backend: '", per_second_name,
                     "' is not redis or redis_cluster"));
  }
  if (!per_second_name.empty() && backend_name == "memory") {
    Die("--redis_per_second_backend needs --backend=redis or redis_cluster");
  }
  const std::string failure_mode_name = absl::GetFlag(FLAGS_failure_mode);
  const std::optional<FailureMode> failure_mode = ParseFailureMode(failure_mode_name);
  if (!failure_mode.has_value()) {
    Die(absl::StrCat("--failure_mode: '", failure_mode_name, "' is not allow, deny or local"));
  }
  if (absl::GetFlag(FLAGS_replicas_hint) < 1) {
    Die("--replicas_hint must be at least 1");
  }
  const std::string redis_clock = absl::GetFlag(FLAGS_redis_clock);
  if (redis_clock != "redis" && redis_clock != "local") {
    Die(absl::StrCat("--redis_clock: '", redis_clock, "' is not redis or local"));
  }
  if (absl::GetFlag(FLAGS_redis_timeout) <= absl::ZeroDuration()) {
    Die("--redis_timeout must be positive");
  }
  if (absl::GetFlag(FLAGS_redis_max_batch) < 1) {
    Die("--redis_max_batch must be at least 1");
  }
  for (auto [name, value] : {std::pair{"max_descriptors", absl::GetFlag(FLAGS_max_descriptors)},
                             std::pair{"max_entries", absl::GetFlag(FLAGS_max_entries)},
                             std::pair{"max_key_bytes", absl::GetFlag(FLAGS_max_key_bytes)}}) {
    if (value < 1) {
      Die(absl::StrCat("--", name, " must be at least 1"));
    }
  }
  const double near_limit_ratio = absl::GetFlag(FLAGS_near_limit_ratio);
  if (!(near_limit_ratio >= 0 && near_limit_ratio <= 1)) {
    Die(absl::StrCat("--near_limit_ratio: ", near_limit_ratio, " is not between 0 and 1"));
  }

  // A write to a socket whose peer has gone (hiredis' and libevent's write(2), not send with
  // MSG_NOSIGNAL) must fail with EPIPE, not end the process.
  signal(SIGPIPE, SIG_IGN);
  // Signals are taken through a signalfd below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Clock& clock = RealClock::Get();
  Metrics metrics(static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_max_rule_metric_series))));
  ConfigStore store(config);
  if (config != nullptr) {
    metrics.ConfigInForce(config->RuleCount(), ConfigVersion(*config), absl::Now());
  }
  std::unique_ptr<Backend> backend;
  std::vector<RedisBackend*> redis_backends;  // to stop before the HTTP loop goes away
  if (backend_name == "memory") {
    MemoryBackendOptions memory_options;
    memory_options.max_keys =
        static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_memory_max_keys)));
    backend = std::make_unique<MemoryBackend>(clock, memory_options);
  } else {
    RedisTarget main_target{backend_name, absl::GetFlag(FLAGS_redis_addresses),
                            absl::GetFlag(FLAGS_redis_username),
                            absl::GetFlag(FLAGS_redis_password),
                            absl::GetFlag(FLAGS_redis_connections)};
    std::unique_ptr<RedisBackend> main_redis = CreateRedisBackend(main_target, clock, backend_name);
    redis_backends.push_back(main_redis.get());
    backend = std::move(main_redis);
    if (!per_second_name.empty()) {
      RedisTarget per_second_target{per_second_name,
                                    absl::GetFlag(FLAGS_redis_per_second_addresses),
                                    absl::GetFlag(FLAGS_redis_per_second_username),
                                    absl::GetFlag(FLAGS_redis_per_second_password),
                                    absl::GetFlag(FLAGS_redis_per_second_connections)};
      std::unique_ptr<RedisBackend> per_second =
          CreateRedisBackend(per_second_target, clock, "per-second " + per_second_name);
      redis_backends.push_back(per_second.get());
      backend = std::make_unique<PerSecondBackend>(std::move(backend), std::move(per_second));
    }
  }

  RateLimiterOptions limiter_options;
  limiter_options.max_descriptors = absl::GetFlag(FLAGS_max_descriptors);
  limiter_options.max_entries = absl::GetFlag(FLAGS_max_entries);
  limiter_options.max_key_bytes = absl::GetFlag(FLAGS_max_key_bytes);
  limiter_options.key_prefix = absl::GetFlag(FLAGS_redis_key_prefix);
  limiter_options.failure_mode = *failure_mode;
  limiter_options.replicas_hint = static_cast<uint32_t>(absl::GetFlag(FLAGS_replicas_hint));
  limiter_options.local_max_keys =
      static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_memory_max_keys)));
  limiter_options.near_limit_ratio = near_limit_ratio;
  limiter_options.global_shadow_mode = absl::GetFlag(FLAGS_shadow_mode);
  limiter_options.global_quota_mode = absl::GetFlag(FLAGS_quota_mode);
  limiter_options.response_dynamic_metadata = absl::GetFlag(FLAGS_response_dynamic_metadata);
  limiter_options.rate_limit_headers = absl::GetFlag(FLAGS_rate_limit_headers);
  limiter_options.limit_header = absl::GetFlag(FLAGS_rate_limit_limit_header);
  limiter_options.remaining_header = absl::GetFlag(FLAGS_rate_limit_remaining_header);
  limiter_options.reset_header = absl::GetFlag(FLAGS_rate_limit_reset_header);
  limiter_options.ietf_rate_limit_headers = absl::GetFlag(FLAGS_ietf_rate_limit_headers);
  limiter_options.retry_after_header = absl::GetFlag(FLAGS_retry_after_header);
  limiter_options.count_denied_hits = absl::GetFlag(FLAGS_count_denied_hits);
  // The memory backend is as fast as the cache: only a remote backend gets one.
  std::unique_ptr<OverLimitCache> over_limit_cache;
  if (!redis_backends.empty() && absl::GetFlag(FLAGS_over_limit_cache_keys) > 0) {
    over_limit_cache = std::make_unique<OverLimitCache>(
        clock, static_cast<size_t>(absl::GetFlag(FLAGS_over_limit_cache_keys)));
  }
  RateLimiter limiter(store, *backend, clock, metrics, limiter_options, over_limit_cache.get());

  RateLimitGrpcService service(limiter, &metrics.RequestLatency(Transport::kGrpc));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ApplyGrpcServerSettings(GrpcServerSettings{}, builder);
  int grpc_port = 0;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = GrpcServerCredentials(
      {.cert_file = absl::GetFlag(FLAGS_tls_cert),
       .key_file = absl::GetFlag(FLAGS_tls_key),
       .client_ca_file = absl::GetFlag(FLAGS_tls_client_ca),
       .reload_interval_seconds = static_cast<int>(
           absl::ToInt64Seconds(absl::GetFlag(FLAGS_tls_reload_interval)))});
  if (!credentials.ok()) {
    Die(std::string(credentials.status().message()));
  }
  builder.AddListeningPort(absl::GetFlag(FLAGS_grpc_address), *credentials, &grpc_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  const bool unix_socket = absl::StartsWith(absl::GetFlag(FLAGS_grpc_address), "unix:");
  if (server == nullptr || (grpc_port == 0 && !unix_socket)) {
    Die(absl::StrCat("cannot listen on gRPC address ", absl::GetFlag(FLAGS_grpc_address)));
  }
  // Health answers for "" (the whole server), for "ratelimit" (what envoyproxy/ratelimit
  // registers and existing probes ask) and for the RLS service's full name.
  const bool healthy_requires_config = absl::GetFlag(FLAGS_healthy_with_at_least_one_config_loaded);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  auto set_health = [health](bool serving) {
    health->SetServingStatus(serving);
    for (const char* name : {"ratelimit", "envoy.service.ratelimit.v3.RateLimitService"}) {
      health->SetServingStatus(name, serving);
    }
  };
  auto config_healthy = [healthy_requires_config](const Config* c) {
    return !healthy_requires_config || (c != nullptr && !c->domains().empty());
  };
  set_health(config_healthy(config.get()));

  HttpServerOptions http_options;
  http_options.healthy_requires_config = healthy_requires_config;
  HttpServer http(limiter, store, *backend, metrics, http_options);
  if (absl::Status s = http.Start(absl::GetFlag(FLAGS_http_address),
                                  absl::GetFlag(FLAGS_debug_address));
      !s.ok()) {
    Die(std::string(s.message()));
  }
  SLUICE_LOG(INFO) << "sluice serving: gRPC on "
                   << (unix_socket ? absl::GetFlag(FLAGS_grpc_address)
                                   : absl::StrCat("port ", grpc_port))
                   << ", HTTP on port " << http.port()
                   << (http.debug_port() != 0 ? absl::StrCat(" and ", http.debug_port()) : "")
                   << ", backend " << backend->Name() << ", "
                   << (config != nullptr ? config->RuleCount() : 0) << " rules";

  std::atomic<bool> draining{false};
  ConfigWatcher watcher(config_path, load_options, store,
                        [&](bool ok, const Config* next) {
                          metrics.CountConfigReload(ok);
                          if (next != nullptr) {
                            metrics.ConfigInForce(next->RuleCount(), ConfigVersion(*next),
                                                  absl::Now());
                            if (!draining.load()) {
                              set_health(config_healthy(next));
                            }
                          }
                        });
  // The main thread waits for a signal (signalfd), a change under the config path (inotify),
  // or the next poll, which stays as a fallback for file systems inotify does not see into.
  const absl::Duration poll = absl::GetFlag(FLAGS_config_poll_interval);
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    Die(absl::StrCat("signalfd: ", std::strerror(errno)));
  }
  std::unique_ptr<ConfigChangeNotifier> notifier;
  if (absl::GetFlag(FLAGS_config_watch)) {
    auto created = ConfigChangeNotifier::Create(config_path, load_options.recursive);
    if (created.ok()) {
      notifier = std::move(*created);
    } else {
      SLUICE_LOG(WARNING) << "config changes are seen by polling only: " << created.status();
    }
  }
  absl::Time next_poll = absl::Now() + poll;
  while (true) {
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {notifier ? notifier->fd() : -1, POLLIN, 0}};
    const absl::Duration wait =
        poll > absl::ZeroDuration() ? std::max(next_poll - absl::Now(), absl::ZeroDuration())
                                    : absl::Hours(1);
    const int ready = ::poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(wait)) + 1);
    if (ready > 0 && (fds[0].revents & POLLIN) != 0) {
      signalfd_siginfo info;
      if (read(signal_fd, &info, sizeof(info)) != static_cast<ssize_t>(sizeof(info))) {
        continue;
      }
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGHUP) {
        watcher.Poll(/*force=*/true);
        continue;
      }
      SLUICE_LOG(INFO) << "signal " << sig << ": draining";
      break;
    }
    if (ready > 0 && (fds[1].revents & POLLIN) != 0) {
      // An update is often several events (a ConfigMap writes a directory, then renames a
      // symlink): wait until the path has been quiet for 50 ms, at most half a second.
      const absl::Time settle_by = absl::Now() + absl::Milliseconds(500);
      while (notifier->Drain() && absl::Now() < settle_by) {
        pollfd quiet = {notifier->fd(), POLLIN, 0};
        ::poll(&quiet, 1, 50);
      }
      watcher.Poll(/*force=*/false);
      continue;
    }
    if (poll > absl::ZeroDuration() && absl::Now() >= next_poll) {
      watcher.Poll(/*force=*/false);
      next_poll = absl::Now() + poll;
    }
  }
  close(signal_fd);

  draining.store(true);
  http.SetDraining();
  set_health(false);
  // Stop accepting, let in-flight calls finish (up to the grace period), then stop.
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_shutdown_grace)));
  server->Wait();
  for (RedisBackend* redis : redis_backends) {
    // Completes any /json call still waiting on Redis before the HTTP loop goes away.
    redis->Stop();
  }
  http.Stop();
  SLUICE_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Sluice rate-limit service (Envoy RLS v3).\n"
      "  sluice --config=PATH [--grpc_address=HOST:PORT] [--http_address=HOST:PORT]\n"
      "Every flag can also be set as environment variable SLUICE_<FLAG IN UPPER CASE>;\n"
      "envoyproxy/ratelimit's environment variables (PORT, REDIS_URL, RUNTIME_ROOT, ...) are\n"
      "read too, below both (see README, Migrating from envoyproxy/ratelimit).");
  // Precedence, lowest first: envoyproxy/ratelimit's variables, SLUICE_* variables, flags.
  if (absl::Status s = sluice::ApplyUpstreamEnvironment(); !s.ok()) {
    std::fprintf(stderr, "sluice: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (absl::Status s = sluice::ApplyFlagsFromEnvironment("SLUICE_", sluice::OwnFlagNames());
      !s.ok()) {
    std::fprintf(stderr, "sluice: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  absl::ParseCommandLine(argc, argv);
  // gRPC locks absl::Mutex on every call; Debian's abseil checks each lock for deadlock cycles
  // by default, which costs a few percent of CPU per request. (Kept identical in sluice-floor.)
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return sluice::Run();
}
