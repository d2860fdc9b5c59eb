#include "server/process/part_options.h"

#include <map>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/settings/flag_layers.h"
#include "server/settings/setting_flags.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Verifies the config loader gets the config settings that bound and shape loading.
TEST(PartOptionsTest, ConfigLoadOptions) {
  ConfigSettings config;
  config.merge_domains = true;
  config.recursive = true;
  config.ignore_dot_files = false;
  config.max_file_bytes = 10;
  config.max_nodes = 20;
  config.max_scalar_bytes = 30;
  const ConfigLoadOptions options = ConfigLoadOptionsFrom(config, BackendSettings());
  EXPECT_TRUE(options.merge_domains);
  EXPECT_TRUE(options.recursive);
  EXPECT_FALSE(options.ignore_dot_files);
  EXPECT_EQ(options.max_file_bytes, 10);
  EXPECT_EQ(options.max_nodes, 20);
  EXPECT_EQ(options.max_scalar_bytes, 30);
  EXPECT_EQ(options.fixed_windows_only, "");
  BackendSettings memcached;
  memcached.kind = BackendKind::kMemcached;
  EXPECT_EQ(ConfigLoadOptionsFrom(config, memcached).fixed_windows_only, "memcached");
}

// Verifies the memcached backend gets its servers, SRV name, pool and TLS, the budget, breaker,
// I/O threads and queue grace the Redis flags set, and the storage keys' prefix.
TEST(PartOptionsTest, MemcachedBackendOptions) {
  BackendSettings backend;
  backend.kind = BackendKind::kMemcached;
  backend.memcached.servers = {"a:1", "b:2"};
  backend.memcached.srv_refresh = absl::Seconds(9);
  backend.memcached.connections = 3;
  backend.memcached.tls = true;
  backend.memcached.tls_ca = "ca.pem";
  backend.memcached.tls_skip_hostname_verification = true;
  backend.shared.timeout = absl::Milliseconds(7);
  backend.shared.io_threads = 2;
  backend.shared.breaker_failures = 4;
  backend.shared.queue_grace = absl::Milliseconds(3);
  LimiterSettings limiter;
  limiter.key_prefix = "rl_";
  const MemcachedBackendOptions options = MemcachedBackendOptionsFrom(backend, limiter);
  EXPECT_THAT(options.client.servers, ElementsAre("a:1", "b:2"));
  EXPECT_EQ(options.client.srv_refresh, absl::Seconds(9));
  EXPECT_EQ(options.client.connections, 3);
  EXPECT_TRUE(options.client.tls.enabled);
  EXPECT_EQ(options.client.tls.ca_file, "ca.pem");
  EXPECT_TRUE(options.client.tls.skip_hostname_verification);
  EXPECT_EQ(options.timeout, absl::Milliseconds(7));
  EXPECT_EQ(options.client.io_threads, 2);
  EXPECT_EQ(options.client.breaker_failures, 4);
  EXPECT_EQ(options.client.queue_grace, absl::Milliseconds(3));
  EXPECT_EQ(options.key_prefix, "rl_");
}

// Verifies the memory bounds, in bytes, with fewer than one key counted as one, for the memory
// backend and for the limiter's failure_mode local store alike.
TEST(PartOptionsTest, MemoryBoundsForBothStores) {
  Settings settings;
  settings.backend.memory_max_keys = 0;
  settings.backend.memory_max_mib = 3;
  const MemoryBackendOptions memory = MemoryBackendOptionsFrom(settings.backend);
  EXPECT_EQ(memory.max_keys, 1u);
  EXPECT_EQ(memory.max_bytes, size_t{3} << 20);
  const RateLimiterOptions limiter = RateLimiterOptionsFrom(settings);
  EXPECT_EQ(limiter.local_max_keys, 1u);
  EXPECT_EQ(limiter.local_max_bytes, size_t{3} << 20);
}

// Verifies one Redis gets its own target's addresses, credentials and pool, with what both
// Redis share; false --redis_caller_writes means no caller writes at all.
TEST(PartOptionsTest, RedisBackendOptions) {
  RedisSettings shared;
  shared.db = 4;
  shared.timeout = absl::Milliseconds(7);
  shared.queue_grace = absl::Milliseconds(2);
  shared.clock = RedisClockSource::kLocal;
  shared.io_threads = 3;
  shared.max_batch = 5;
  shared.caller_writes = false;
  shared.breaker_failures = 9;
  shared.breaker_open = absl::Seconds(4);
  shared.breaker_open_min = absl::Milliseconds(60);
  RedisTargetSettings target;
  target.addresses = {"10.0.0.1:6379", "10.0.0.2:6379"};
  target.username = "ann";
  target.password = "secret";
  target.connections = 6;
  const RedisBackendOptions options = RedisBackendOptionsFrom(shared, target, /*cluster=*/true);
  EXPECT_TRUE(options.cluster);
  EXPECT_THAT(options.cluster_seeds, ElementsAre("10.0.0.1:6379", "10.0.0.2:6379"));
  EXPECT_EQ(options.client.address, "10.0.0.1:6379");
  EXPECT_EQ(options.client.username, "ann");
  EXPECT_EQ(options.client.password, "secret");
  EXPECT_EQ(options.client.db, 4);
  EXPECT_EQ(options.client.io_threads, 3);
  EXPECT_EQ(options.client.connections_per_thread, 6);
  EXPECT_EQ(options.client.caller_write_horizon, absl::ZeroDuration());
  EXPECT_EQ(options.client.breaker_failures, 9);
  EXPECT_EQ(options.client.breaker_open, absl::Seconds(4));
  EXPECT_EQ(options.client.breaker_open_min, absl::Milliseconds(60));
  EXPECT_EQ(options.client.queue_grace, absl::Milliseconds(2));
  EXPECT_EQ(options.timeout, absl::Milliseconds(7));
  EXPECT_TRUE(options.use_caller_clock);
  EXPECT_EQ(options.max_batch, 5u);

  shared.caller_writes = true;
  EXPECT_EQ(RedisBackendOptionsFrom(shared, target, false).client.caller_write_horizon,
            RedisClientOptions().caller_write_horizon);
  EXPECT_FALSE(RedisBackendOptionsFrom(RedisSettings(), target, false).use_caller_clock);
}

// Verifies a Redis with TLS on gets the TLS setup both Redis share, and one without it gets
// none, whichever of the two it is.
TEST(PartOptionsTest, RedisTlsOptions) {
  RedisSettings shared;
  shared.tls_ca = "/certs/ca.crt";
  shared.tls_cert = "/certs/tls.crt";
  shared.tls_key = "/certs/tls.key";
  shared.tls_server_name = "redis.internal";
  shared.tls_skip_hostname_verification = true;
  RedisTargetSettings main;
  main.addresses = {"10.0.0.1:6380", "10.0.0.2:6380"};
  main.tls = true;
  const RedisBackendOptions cluster = RedisBackendOptionsFrom(shared, main, /*cluster=*/true);
  const RedisTlsOptions& tls = cluster.client.tls;
  EXPECT_TRUE(tls.enabled);
  EXPECT_EQ(tls.ca_file, "/certs/ca.crt");
  EXPECT_EQ(tls.cert_file, "/certs/tls.crt");
  EXPECT_EQ(tls.key_file, "/certs/tls.key");
  EXPECT_EQ(tls.server_name, "redis.internal");
  EXPECT_TRUE(tls.skip_hostname_verification);
  EXPECT_EQ(tls.reload_interval, RedisTlsOptions().reload_interval);

  RedisTargetSettings per_second;
  per_second.addresses = {"10.0.0.3:6379"};
  const RedisTlsOptions plain = RedisBackendOptionsFrom(shared, per_second, false).client.tls;
  EXPECT_FALSE(plain.enabled);
  EXPECT_EQ(plain.ca_file, "");
  EXPECT_EQ(plain.cert_file, "");
  EXPECT_EQ(plain.key_file, "");
  EXPECT_EQ(plain.server_name, "");
  EXPECT_FALSE(plain.skip_hostname_verification);
  per_second.tls = true;
  EXPECT_TRUE(RedisBackendOptionsFrom(shared, per_second, false).client.tls.enabled);
}

// Verifies a Redis with sentinels gets them, the master's name and the sentinels' credentials
// as the client's Sentinel options, with no address of its own (the per-second Redis has none
// to give), its own credentials kept for the master and TLS for the sentinels too; one without
// sentinels gets no Sentinel.
TEST(PartOptionsTest, RedisSentinelOptions) {
  RedisSettings shared;
  shared.tls_ca = "/certs/ca.crt";
  RedisTargetSettings target;
  target.sentinels = {"10.0.0.1:26379", "10.0.0.2:26379"};
  target.sentinel_master = "mymaster";
  target.sentinel_username = "watcher";
  target.sentinel_password = "s3cret";
  target.username = "app";
  target.password = "hunter2";
  target.tls = true;
  const RedisBackendOptions options = RedisBackendOptionsFrom(shared, target, false);
  const RedisSentinelOptions& sentinel = options.client.sentinel;
  EXPECT_THAT(sentinel.addresses, ElementsAre("10.0.0.1:26379", "10.0.0.2:26379"));
  EXPECT_EQ(sentinel.master, "mymaster");
  EXPECT_EQ(sentinel.username, "watcher");
  EXPECT_EQ(sentinel.password, "s3cret");
  EXPECT_EQ(options.client.address, "");
  EXPECT_THAT(options.cluster_seeds, IsEmpty());
  EXPECT_EQ(options.client.username, "app");
  EXPECT_EQ(options.client.password, "hunter2");
  EXPECT_TRUE(options.client.tls.enabled);
  EXPECT_EQ(options.client.tls.ca_file, "/certs/ca.crt");

  // The main Redis's default address is not used with sentinels.
  target.addresses = BackendSettings::DefaultRedis().addresses;
  EXPECT_EQ(RedisBackendOptionsFrom(shared, target, false).client.address, "");

  RedisTargetSettings plain;
  plain.addresses = {"10.0.0.3:6379"};
  const RedisBackendOptions direct = RedisBackendOptionsFrom(shared, plain, false);
  EXPECT_EQ(direct.client.address, "10.0.0.3:6379");
  EXPECT_THAT(direct.client.sentinel.addresses, IsEmpty());
  EXPECT_EQ(direct.client.sentinel.master, "");
}

// Verifies upstream's Sentinel variables, main and per-second, reach the clients' Sentinel
// options through the flags and settings they set.
TEST(PartOptionsTest, UpstreamSentinelVariablesReachTheClients) {
  const std::map<std::string, std::string> env = {
      {"RUNTIME_ROOT", "/srv/runtime"},
      {"REDIS_TYPE", "sentinel"},
      {"REDIS_URL", "mymaster,10.0.0.1:26379,10.0.0.2:26379"},
      {"REDIS_AUTH", "hunter2"},
      {"REDIS_SENTINEL_AUTH", "watcher:s3cret"},
      {"REDIS_PERSECOND", "true"},
      {"REDIS_PERSECOND_TYPE", "sentinel"},
      {"REDIS_PERSECOND_URL", "fastmaster,10.0.1.1:26379"},
      {"REDIS_PERSECOND_SENTINEL_AUTH", "f4st"},
  };
  LayeredFlags layered = LayerFlags(
      [&env](absl::string_view name) -> std::optional<std::string> {
        auto it = env.find(std::string(name));
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
      },
      {});
  ASSERT_THAT(layered.errors, IsEmpty());
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  ASSERT_THAT(read.errors, IsEmpty());
  const BackendSettings& backend = read.settings.backend;
  ASSERT_EQ(backend.kind, BackendKind::kRedis);
  ASSERT_EQ(backend.per_second_kind, BackendKind::kRedis);

  const RedisClientOptions main =
      RedisBackendOptionsFrom(backend.shared, backend.redis, false).client;
  EXPECT_THAT(main.sentinel.addresses, ElementsAre("10.0.0.1:26379", "10.0.0.2:26379"));
  EXPECT_EQ(main.sentinel.master, "mymaster");
  EXPECT_EQ(main.sentinel.username, "watcher");
  EXPECT_EQ(main.sentinel.password, "s3cret");
  EXPECT_EQ(main.password, "hunter2");
  const RedisClientOptions per_second =
      RedisBackendOptionsFrom(backend.shared, backend.per_second, false).client;
  EXPECT_THAT(per_second.sentinel.addresses, ElementsAre("10.0.1.1:26379"));
  EXPECT_EQ(per_second.sentinel.master, "fastmaster");
  EXPECT_EQ(per_second.sentinel.username, "");
  EXPECT_EQ(per_second.sentinel.password, "f4st");
}

// Verifies the limiter gets the request bounds, key prefix, failure policy and the
// envoyproxy/ratelimit compatibility switches.
TEST(PartOptionsTest, RateLimiterOptions) {
  Settings settings;
  LimiterSettings& limiter = settings.limiter;
  limiter.max_descriptors = 2;
  limiter.max_entries = 3;
  limiter.max_key_bytes = 4;
  limiter.key_prefix = "p:";
  limiter.failure_mode = FailureMode::kDeny;
  limiter.replicas_hint = 5;
  limiter.near_limit_ratio = 0.25;
  limiter.shadow_mode = true;
  limiter.quota_mode = true;
  limiter.response_dynamic_metadata = true;
  limiter.rate_limit_headers = true;
  limiter.limit_header = "L";
  limiter.remaining_header = "R";
  limiter.reset_header = "T";
  limiter.ietf_rate_limit_headers = true;
  limiter.retry_after_header = false;
  limiter.count_denied_hits = true;
  RateLimiterOptions options = RateLimiterOptionsFrom(settings);
  EXPECT_EQ(options.max_descriptors, 2u);
  EXPECT_EQ(options.max_entries, 3u);
  EXPECT_EQ(options.max_key_bytes, 4u);
  EXPECT_EQ(options.key_prefix, "p:");
  EXPECT_EQ(options.failure_mode, FailureMode::kDeny);
  EXPECT_EQ(options.replicas_hint, 5u);
  EXPECT_EQ(options.respond.near_limit_ratio, 0.25);
  EXPECT_TRUE(options.respond.global_shadow_mode);
  EXPECT_TRUE(options.respond.global_quota_mode);
  EXPECT_TRUE(options.respond.response_dynamic_metadata);
  EXPECT_TRUE(options.respond.rate_limit_headers);
  EXPECT_EQ(options.respond.limit_header, "L");
  EXPECT_EQ(options.respond.remaining_header, "R");
  EXPECT_EQ(options.respond.reset_header, "T");
  EXPECT_TRUE(options.respond.ietf_rate_limit_headers);
  EXPECT_FALSE(options.respond.retry_after_header);
  EXPECT_EQ(options.default_charge, Charge::kAlways);
  EXPECT_EQ(options.default_charge_fixed_window, Charge::kAlways);  // count_denied_hits: all
  limiter.count_denied_hits = false;
  limiter.default_charge_fixed_window = Charge::kAlways;
  options = RateLimiterOptionsFrom(settings);
  EXPECT_EQ(options.default_charge, Charge::kIfAdmitted);
  EXPECT_EQ(options.default_charge_fixed_window, Charge::kAlways);
}

// Verifies the HTTP server's and the gRPC listener's options.
TEST(PartOptionsTest, HttpAndGrpcOptions) {
  Settings settings;
  settings.healthy_requires_config = true;
  settings.http.max_connections = 12;
  settings.http.request_timeout = absl::Seconds(3);
  settings.http.config_dump_max_bytes = 99;
  const HttpServerOptions http = HttpServerOptionsFrom(settings);
  EXPECT_TRUE(http.healthy_requires_config);
  EXPECT_EQ(http.max_connections, 12u);
  EXPECT_EQ(http.request_timeout, absl::Seconds(3));
  EXPECT_EQ(http.config_dump_max_bytes, 99u);

  settings.grpc.tls_cert = "c.pem";
  settings.grpc.tls_key = "k.pem";
  settings.grpc.tls_client_ca = "ca.pem";
  settings.grpc.tls_reload_interval = absl::Milliseconds(2500);
  const GrpcTlsSettings tls = GrpcTlsSettingsFrom(settings.grpc);
  EXPECT_EQ(tls.cert_file, "c.pem");
  EXPECT_EQ(tls.key_file, "k.pem");
  EXPECT_EQ(tls.client_ca_file, "ca.pem");
  EXPECT_EQ(tls.reload_interval_seconds, 2);
}

// Verifies the statsd settings reach the sink: address, protocol, interval, DogStatsD, the tags
// and the mogrifiers in their order.
TEST(PartOptionsTest, StatsdSinkOptions) {
  StatsdSettings statsd;
  statsd.address = "statsd:9125";
  statsd.protocol = StatsdSettings::Protocol::kTcp;
  statsd.flush_interval = absl::Seconds(3);
  statsd.dogstatsd = true;
  statsd.extra_tags = {{"b", "2"}, {"a", "1"}};
  statsd.dogstatsd_tags = {"env:prod"};
  statsd.mogrifiers = {{"M", "^x(.*)$", "y$1", {{"t", "$1"}}}, {"N", "z", "w", {}}};
  const StatsdSinkOptions options = StatsdSinkOptionsFrom(statsd);
  EXPECT_EQ(options.address, "statsd:9125");
  EXPECT_EQ(options.protocol, StatsdProtocol::kTcp);
  EXPECT_EQ(options.flush_interval, absl::Seconds(3));
  EXPECT_TRUE(options.encoder.dogstatsd);
  EXPECT_EQ(options.encoder.extra_tags, statsd.extra_tags);
  EXPECT_EQ(options.encoder.global_tags, statsd.dogstatsd_tags);
  ASSERT_EQ(options.mogrifiers.size(), 2u);
  EXPECT_EQ(options.mogrifiers[0].id, "M");
  EXPECT_EQ(options.mogrifiers[0].pattern, "^x(.*)$");
  EXPECT_EQ(options.mogrifiers[0].name, "y$1");
  EXPECT_EQ(options.mogrifiers[0].tags, statsd.mogrifiers[0].tags);
  EXPECT_EQ(options.mogrifiers[1].id, "N");
  EXPECT_EQ(StatsdSinkOptionsFrom(StatsdSettings{}).protocol, StatsdProtocol::kUdp);
}

}  // namespace
}  // namespace sluice
