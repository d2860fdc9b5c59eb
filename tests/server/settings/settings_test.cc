#include "server/settings/settings.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The messages of ValidateSettings(settings), in order.
std::vector<std::string> Messages(const Settings& settings) {
  std::vector<std::string> messages;
  for (const SettingError& error : ValidateSettings(settings)) {
    messages.push_back(error.message);
  }
  return messages;
}

// Settings as a minimal start gives them: the defaults and a config path.
Settings Valid() {
  Settings settings;
  settings.config.path = "/etc/sluice";
  return settings;
}

// Verifies the defaults need only a config path, with a Redis backend too.
TEST(SettingsTest, DefaultsWithAConfigAreValid) {
  EXPECT_THAT(Messages(Valid()), IsEmpty());
  Settings redis = Valid();
  redis.backend.kind = BackendKind::kRedisCluster;
  redis.backend.per_second_kind = BackendKind::kRedis;
  redis.backend.per_second.addresses = {"127.0.0.1:6380"};
  EXPECT_THAT(Messages(redis), IsEmpty());
  EXPECT_THAT(Messages(Settings()),
              ElementsAre("--config is required (a YAML file or a directory of them; or "
                          "envoyproxy/ratelimit's RUNTIME_ROOT and friends; or "
                          "--config_source=xds)"));
}

// Verifies --config_source=xds needs no --config, and that its settings are checked, every
// problem at once.
TEST(SettingsTest, XdsSettingsAreCheckedWithTheXdsSource) {
  Settings xds;
  xds.config.source = ConfigSourceKind::kXds;
  EXPECT_THAT(Messages(xds), IsEmpty());
  xds.config.xds.server = "";
  xds.config.xds.tls_cert = "client.crt";
  xds.config.xds.backoff_initial = absl::Seconds(90);
  xds.config.xds.backoff_random_factor = 2;
  xds.check_config = true;
  EXPECT_THAT(Messages(xds),
              ElementsAre("--xds_server is required with --config_source=xds (HOST:PORT)",
                          "--xds_tls_cert and --xds_tls_key go together (mutual TLS to the xDS "
                          "server)",
                          "--xds_tls_cert, --xds_tls_key, --xds_tls_ca and --xds_tls_server_name "
                          "need --xds_tls",
                          "--xds_backoff_max must be at least --xds_backoff_initial",
                          "--xds_backoff_random_factor: 2 is not between 0 and 1",
                          "--check_config checks config files (--config), not "
                          "--config_source=xds"));
  // With files, the xDS settings are not read.
  Settings files = Valid();
  files.config.xds = xds.config.xds;
  EXPECT_THAT(Messages(files), IsEmpty());
}

// Verifies every bad setting is reported at once, each naming its flag, in a fixed order.
TEST(SettingsTest, ReportsEveryBadSettingAtOnce) {
  Settings settings;
  settings.config.max_nodes = 0;
  settings.backend.per_second_kind = BackendKind::kRedis;
  settings.backend.shared.timeout = absl::ZeroDuration();
  settings.backend.shared.max_batch = 0;
  settings.backend.memory_max_mib = kMaxMib + 1;
  settings.limiter.replicas_hint = 0;
  settings.limiter.max_key_bytes = -3;
  settings.limiter.over_limit_cache_max_mib = 0;
  settings.limiter.near_limit_ratio = 1.5;
  settings.grpc.address = "127.0.0.1:65536";
  settings.grpc.tls_key = "key.pem";
  settings.grpc.tls_client_ca = "ca.pem";
  settings.http.max_connections = 0;
  settings.http.request_timeout = absl::Microseconds(999);
  settings.http.config_dump_max_bytes = 0;
  EXPECT_THAT(
      Messages(settings),
      ElementsAre("--config is required (a YAML file or a directory of them; or "
                  "envoyproxy/ratelimit's RUNTIME_ROOT and friends; or --config_source=xds)",
                  "--config_max_nodes must be at least 1",
                  "--redis_per_second_backend needs --backend=redis or redis_cluster",
                  "--redis_timeout must be positive", "--redis_max_batch must be at least 1",
                  "--memory_max_mib: 1048577 is not between 1 and 1048576 (MiB)",
                  "--replicas_hint must be at least 1", "--max_key_bytes must be at least 1",
                  "--over_limit_cache_max_mib: 0 is not between 1 and 1048576 (MiB)",
                  "--near_limit_ratio: 1.5 is not between 0 and 1",
                  "--grpc_address: '127.0.0.1:65536': port '65536' is not a number from 0 to "
                  "65535",
                  "--tls_cert and --tls_key go together: give both or neither",
                  "--tls_client_ca needs --tls_cert and --tls_key",
                  "--http_max_connections must be at least 1",
                  "--http_request_timeout must be at least 1ms",
                  "--config_dump_max_bytes must be at least 1"));
}

// Verifies each error names the flags it is about, the one at fault first.
TEST(SettingsTest, ErrorsNameTheirFlags) {
  Settings settings = Valid();
  settings.backend.per_second_kind = BackendKind::kRedis;
  settings.grpc.tls_cert = "cert.pem";
  settings.grpc.tls_key = "key.pem";
  settings.grpc.tls_reload_interval = absl::Milliseconds(999);
  const std::vector<SettingError> errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_per_second_backend", "backend"));
  EXPECT_THAT(errors[1].flags, ElementsAre("tls_reload_interval"));
  EXPECT_EQ(errors[1].message, "--tls_reload_interval must be at least 1s");
}

// Verifies the connection age and the start-up wait: 0 is valid for the age, the grace and the
// max elapsed time (no limit), an initial interval above the max too (every wait is the max, as
// upstream's backoff); a negative age or grace, a non-positive interval and a negative max
// elapsed time are errors naming their flags.
TEST(SettingsTest, ConnectionAgeAndBackendWaitAreChecked) {
  Settings settings = Valid();
  settings.wait_for_backend.enabled = true;
  settings.wait_for_backend.initial_interval = absl::Minutes(1);
  settings.wait_for_backend.max_interval = absl::Seconds(1);
  EXPECT_THAT(Messages(settings), IsEmpty());
  settings.grpc.max_connection_age = absl::Seconds(-1);
  settings.grpc.max_connection_age_grace = absl::Seconds(-1);
  settings.wait_for_backend.initial_interval = absl::ZeroDuration();
  settings.wait_for_backend.max_interval = absl::Seconds(-1);
  settings.wait_for_backend.max_elapsed = absl::Seconds(-1);
  const std::vector<SettingError> errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_THAT(errors[0].flags, ElementsAre("grpc_max_connection_age"));
  EXPECT_EQ(errors[0].message,
            "--grpc_max_connection_age must not be negative (0: connections never age out)");
  EXPECT_THAT(errors[1].flags, ElementsAre("grpc_max_connection_age_grace"));
  EXPECT_THAT(errors[2].flags, ElementsAre("wait_for_backend_initial_interval"));
  EXPECT_EQ(errors[2].message, "--wait_for_backend_initial_interval must be positive");
  EXPECT_THAT(errors[3].flags, ElementsAre("wait_for_backend_max_interval"));
  EXPECT_THAT(errors[4].flags, ElementsAre("wait_for_backend_max_elapsed"));
}

// Verifies each RLQS bound past its most is reported against its own flag, in its own unit:
// --rlqs_max_pending_kib in KiB (to 2^40), the others in MiB (to 2^30).
TEST(SettingsTest, RlqsUpperBoundsNameTheirFlags) {
  Settings settings = Valid();
  settings.grpc.rlqs_max_mib = int64_t{1} << 30;
  settings.grpc.rlqs_max_pending_kib = int64_t{1} << 40;
  EXPECT_THAT(Messages(settings), IsEmpty());
  settings.grpc.rlqs_max_pending_kib = (int64_t{1} << 40) + 1;
  std::vector<SettingError> errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].flags, ElementsAre("rlqs_max_pending_kib"));
  EXPECT_EQ(errors[0].message, "--rlqs_max_pending_kib must be at most 2^40 KiB");
  settings.grpc.rlqs_max_pending_kib = 64;
  settings.grpc.rlqs_max_stream_mib = (int64_t{1} << 30) + 1;
  settings.grpc.rlqs_max_pending_mib = (int64_t{1} << 30) + 1;
  errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].flags, ElementsAre("rlqs_max_stream_mib"));
  EXPECT_EQ(errors[0].message, "--rlqs_max_stream_mib must be at most 2^30 MiB");
  EXPECT_THAT(errors[1].flags, ElementsAre("rlqs_max_pending_mib"));
  EXPECT_EQ(errors[1].message, "--rlqs_max_pending_mib must be at most 2^30 MiB");
}

// Verifies --prometheus_address and --prometheus_path are checked only when the Prometheus
// listener is on, each error naming its flag.
TEST(SettingsTest, PrometheusListenerIsChecked) {
  Settings settings = Valid();
  settings.prometheus.path = "metrics";
  EXPECT_THAT(Messages(settings), IsEmpty());
  settings.prometheus.address = "127.0.0.1:99999";
  const std::vector<SettingError> errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].flags, ElementsAre("prometheus_address"));
  EXPECT_EQ(errors[0].message,
            "--prometheus_address: '127.0.0.1:99999': port '99999' is not a number from 0 to "
            "65535");
  EXPECT_THAT(errors[1].flags, ElementsAre("prometheus_path"));
  EXPECT_EQ(errors[1].message, "--prometheus_path: 'metrics' does not start with '/'");
  settings.prometheus.address = "0.0.0.0:9090";
  settings.prometheus.path = "/metrics";
  EXPECT_THAT(Messages(settings), IsEmpty());
}

// Verifies the Redis settings are checked only when a Redis backend uses them, each Redis's
// under its own flags.
TEST(SettingsTest, RedisSettingsAreCheckedOnlyForARedisBackend) {
  Settings settings = Valid();
  settings.backend.shared.db = 2;
  settings.backend.shared.io_threads = 0;
  settings.backend.shared.queue_grace = absl::Milliseconds(-1);
  settings.backend.shared.breaker_failures = -1;
  settings.backend.shared.breaker_open = absl::ZeroDuration();
  settings.backend.shared.breaker_open_min = absl::ZeroDuration();
  settings.backend.redis.addresses = {"a:1", "b:2"};
  settings.backend.redis.connections = 0;
  settings.backend.redis.username = "ann";
  EXPECT_THAT(Messages(settings), IsEmpty());  // the memory backend uses none of them

  settings.backend.kind = BackendKind::kRedis;
  settings.backend.per_second_kind = BackendKind::kRedisCluster;
  settings.backend.per_second.connections = 0;
  EXPECT_THAT(
      Messages(settings),
      ElementsAre(
          "--redis_db: a Redis Cluster has only database 0",
          "--redis_io_threads must be at least 1", "--redis_queue_grace must not be negative",
          "--redis_breaker_failures must not be negative", "--redis_breaker_open must be positive",
          "--redis_breaker_open_min must be positive",
          "--redis_addresses: a standalone Redis takes one HOST:PORT "
          "(redis_cluster takes several seed nodes)",
          "--redis_connections must be at least 1", "--redis_username needs --redis_password",
          "--redis_per_second_addresses: no address",
          "--redis_per_second_connections must be at least 1"));
}

// Verifies a cluster takes several seed nodes and only database 0, and a standalone Redis any
// database.
TEST(SettingsTest, ClusterTakesSeedsAndOnlyDatabaseZero) {
  Settings settings = Valid();
  settings.backend.kind = BackendKind::kRedisCluster;
  settings.backend.redis.addresses = {"a:1", "b:2", "c:3"};
  EXPECT_THAT(Messages(settings), IsEmpty());
  settings.backend.shared.db = 1;
  EXPECT_THAT(Messages(settings), ElementsAre("--redis_db: a Redis Cluster has only database 0"));
  EXPECT_THAT(ValidateSettings(settings)[0].flags, ElementsAre("redis_db", "backend"));
  settings.backend.kind = BackendKind::kRedis;
  settings.backend.redis.addresses = {"a:1"};
  EXPECT_THAT(Messages(settings), IsEmpty());
}

// Verifies a Redis with TLS on and the shared TLS files is valid, TCP addresses only, with
// the per-second Redis's TLS its own.
TEST(SettingsTest, RedisTlsIsValidOverTcp) {
  Settings settings = Valid();
  settings.backend.kind = BackendKind::kRedisCluster;
  settings.backend.redis.addresses = {"10.0.0.1:6380", "10.0.0.2:6380"};
  settings.backend.redis.tls = true;
  settings.backend.shared.tls_ca = "/certs/ca.crt";
  settings.backend.shared.tls_cert = "/certs/tls.crt";
  settings.backend.shared.tls_key = "/certs/tls.key";
  settings.backend.shared.tls_server_name = "redis.internal";
  settings.backend.shared.tls_skip_hostname_verification = true;
  EXPECT_THAT(Messages(settings), IsEmpty());
  // The per-second Redis may stay plaintext, even on a unix socket.
  settings.backend.per_second_kind = BackendKind::kRedis;
  settings.backend.per_second.addresses = {"unix:/run/redis.sock"};
  EXPECT_THAT(Messages(settings), IsEmpty());
  // The files may serve the per-second Redis alone.
  settings.backend.redis.tls = false;
  settings.backend.per_second.addresses = {"10.0.0.3:6380"};
  settings.backend.per_second.tls = true;
  EXPECT_THAT(Messages(settings), IsEmpty());
}

// Verifies the TLS checks: the client certificate and its key go together, each shared TLS
// setting needs a Redis with TLS on, and a Redis with TLS on takes no unix socket; each error
// names its flags, the one at fault first.
TEST(SettingsTest, RedisTlsIsChecked) {
  Settings settings = Valid();
  settings.backend.kind = BackendKind::kRedis;
  settings.backend.shared.tls_ca = "/certs/ca.crt";
  settings.backend.shared.tls_cert = "/certs/tls.crt";
  settings.backend.shared.tls_server_name = "redis.internal";
  settings.backend.shared.tls_skip_hostname_verification = true;
  std::vector<SettingError> errors = ValidateSettings(settings);
  EXPECT_THAT(Messages(settings),
              ElementsAre("--redis_tls_cert and --redis_tls_key go together (mutual TLS to Redis)",
                          "--redis_tls_ca needs --redis_tls or --redis_per_second_tls",
                          "--redis_tls_cert needs --redis_tls or --redis_per_second_tls",
                          "--redis_tls_server_name needs --redis_tls or --redis_per_second_tls",
                          "--redis_tls_skip_hostname_verification needs --redis_tls or "
                          "--redis_per_second_tls"));
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_tls_cert", "redis_tls_key"));
  EXPECT_THAT(errors[1].flags, ElementsAre("redis_tls_ca", "redis_tls", "redis_per_second_tls"));

  settings.backend.shared.tls_cert.clear();
  settings.backend.shared.tls_key = "/certs/tls.key";
  settings.backend.redis.tls = true;
  settings.backend.redis.addresses = {"unix:/run/redis.sock"};
  errors = ValidateSettings(settings);
  EXPECT_THAT(Messages(settings),
              ElementsAre("--redis_tls: 'unix:/run/redis.sock' in --redis_addresses is a unix "
                          "socket; TLS to Redis is over TCP (HOST:PORT)",
                          "--redis_tls_cert and --redis_tls_key go together (mutual TLS to "
                          "Redis)"));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_tls", "redis_addresses"));

  // The per-second Redis's TLS, under its own flags.
  settings = Valid();
  settings.backend.kind = BackendKind::kRedis;
  settings.backend.per_second_kind = BackendKind::kRedis;
  settings.backend.per_second.addresses = {"unix:/run/fast.sock"};
  settings.backend.per_second.tls = true;
  errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message,
            "--redis_per_second_tls: 'unix:/run/fast.sock' in --redis_per_second_addresses is a "
            "unix socket; TLS to Redis is over TCP (HOST:PORT)");
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_per_second_tls", "redis_per_second_addresses"));

  // The memory backend reads none of them.
  settings.backend.kind = BackendKind::kMemory;
  settings.backend.per_second_kind.reset();
  settings.backend.redis.tls = true;
  settings.backend.redis.addresses = {"unix:/run/redis.sock"};
  settings.backend.shared.tls_key = "/certs/tls.key";
  EXPECT_THAT(Messages(settings), IsEmpty());
}

// Verifies Redis Sentinel is valid for a standalone Redis, main and per-second, with TLS and
// the sentinels' own credentials; the addresses are then not needed, nor checked.
TEST(SettingsTest, RedisSentinelIsValidForAStandaloneRedis) {
  Settings settings = Valid();
  settings.backend.kind = BackendKind::kRedis;
  RedisTargetSettings& redis = settings.backend.redis;
  redis.sentinels = {"10.0.0.1:26379", "10.0.0.2:26379", "[::1]:26379"};
  redis.sentinel_master = "mymaster";
  redis.sentinel_username = "watcher";
  redis.sentinel_password = "s3cret";
  redis.username = "app";
  redis.password = "hunter2";
  EXPECT_THAT(Messages(settings), IsEmpty());
  // TLS to the sentinels; an unused unix address is no concern, and no address is needed.
  redis.tls = true;
  redis.addresses = {"unix:/run/redis.sock"};
  EXPECT_THAT(Messages(settings), IsEmpty());
  redis.addresses.clear();
  EXPECT_THAT(Messages(settings), IsEmpty());
  // The sentinels' password alone, without a user.
  redis.sentinel_username.clear();
  EXPECT_THAT(Messages(settings), IsEmpty());

  settings.backend.per_second_kind = BackendKind::kRedis;
  settings.backend.per_second.sentinels = {"10.0.1.1:26379"};
  settings.backend.per_second.sentinel_master = "fastmaster";
  EXPECT_THAT(Messages(settings), IsEmpty());
}

// Verifies the Sentinel checks, each error naming its flags with the one at fault first: the
// sentinels and the master's name go together, Sentinel serves no cluster, each sentinel is
// HOST:PORT over TCP, a sentinel user needs a password, and the sentinels' credentials need
// sentinels.
TEST(SettingsTest, RedisSentinelIsChecked) {
  Settings settings = Valid();
  settings.backend.kind = BackendKind::kRedis;
  RedisTargetSettings& redis = settings.backend.redis;
  redis.sentinels = {"10.0.0.1:26379"};
  std::vector<SettingError> errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message,
            "--redis_sentinels and --redis_sentinel_master go together: the sentinels, and the "
            "name they know the master by");
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_sentinel_master", "redis_sentinels"));

  redis.sentinels.clear();
  redis.sentinel_master = "mymaster";
  redis.sentinel_username = "watcher";
  redis.sentinel_password = "s3cret";
  errors = ValidateSettings(settings);
  EXPECT_THAT(Messages(settings),
              ElementsAre("--redis_sentinels and --redis_sentinel_master go together: the "
                          "sentinels, and the name they know the master by",
                          "--redis_sentinel_username needs --redis_sentinels",
                          "--redis_sentinel_password needs --redis_sentinels"));
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_sentinels", "redis_sentinel_master"));
  EXPECT_THAT(errors[2].flags, ElementsAre("redis_sentinel_password", "redis_sentinels"));

  redis.sentinels = {"10.0.0.1", "unix:/run/sentinel.sock", "10.0.0.2:0", ":26379",
                     "10.0.0.3:26379"};
  redis.sentinel_password.clear();
  errors = ValidateSettings(settings);
  EXPECT_THAT(
      Messages(settings),
      ElementsAre("--redis_sentinels: '10.0.0.1' is not HOST:PORT (each sentinel is HOST:PORT)",
                  "--redis_sentinels: 'unix:/run/sentinel.sock' is a unix socket; sentinels are "
                  "reached over TCP (each sentinel is HOST:PORT)",
                  "--redis_sentinels: '10.0.0.2:0': port '0' is not a number from 1 to 65535 "
                  "(each sentinel is HOST:PORT)",
                  "--redis_sentinels: ':26379' has no host before ':PORT' (each sentinel is "
                  "HOST:PORT)",
                  "--redis_sentinel_username needs --redis_sentinel_password"));
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_sentinels"));
  EXPECT_THAT(errors[4].flags, ElementsAre("redis_sentinel_username", "redis_sentinel_password"));

  // A cluster is not Sentinel-managed; the seed nodes are still checked.
  settings = Valid();
  settings.backend.kind = BackendKind::kRedisCluster;
  settings.backend.redis.sentinels = {"10.0.0.1:26379"};
  settings.backend.redis.sentinel_master = "mymaster";
  errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message,
            "--redis_sentinels: Redis Sentinel serves a standalone Redis (--backend=redis), not "
            "redis_cluster");
  EXPECT_THAT(errors[0].flags, ElementsAre("redis_sentinels", "backend"));

  // The per-second Redis's Sentinel, under its own flags.
  settings = Valid();
  settings.backend.kind = BackendKind::kRedis;
  settings.backend.per_second_kind = BackendKind::kRedisCluster;
  settings.backend.per_second.sentinels = {"fast:26379"};
  settings.backend.per_second.sentinel_username = "watcher";
  EXPECT_THAT(Messages(settings),
              ElementsAre("--redis_per_second_sentinels and --redis_per_second_sentinel_master go "
                          "together: the sentinels, and the name they know the master by",
                          "--redis_per_second_sentinels: Redis Sentinel serves a standalone Redis "
                          "(--redis_per_second_backend=redis), not redis_cluster",
                          "--redis_per_second_sentinel_username needs "
                          "--redis_per_second_sentinel_password"));

  // The memory backend reads none of them.
  settings.backend.kind = BackendKind::kMemory;
  settings.backend.per_second_kind.reset();
  settings.backend.redis.sentinel_master = "mymaster";
  EXPECT_THAT(Messages(settings), IsEmpty());
}

// Settings with tracing on and every tracing setting wrong.
Settings BadTracing() {
  Settings settings = Valid();
  TracingSettings& tracing = settings.tracing;
  tracing.endpoint = "collector:4318";
  tracing.headers = {{"", "v"}, {"x-key", "a\r\nx-evil: 1"}};
  tracing.timeout = absl::ZeroDuration();
  tracing.sampling_rate = 1.5;
  tracing.max_queue_spans = 0;
  tracing.max_export_spans = 1;
  tracing.export_interval = absl::Seconds(-1);
  return settings;
}

// Verifies the tracing settings are checked only with --tracing on (given while it is off,
// they are unused), every problem at once, each error naming its flag.
TEST(SettingsTest, TracingIsCheckedWhenOn) {
  Settings on = Valid();
  on.tracing.enabled = true;
  EXPECT_THAT(Messages(on), IsEmpty());
  Settings settings = BadTracing();
  EXPECT_THAT(Messages(settings), IsEmpty());
  settings.tracing.enabled = true;
  EXPECT_THAT(Messages(settings),
              ElementsAre("--tracing_endpoint: 'collector:4318' is not an http:// or https:// "
                          "URL (--tracing_protocol=http takes the traces URL, e.g. "
                          "http://collector:4318/v1/traces)",
                          "--tracing_headers: a header has no name",
                          "--tracing_headers: header 'x-key' holds a line break",
                          "--tracing_timeout must be positive",
                          "--tracing_sampling_rate: 1.5 is not between 0 and 1",
                          "--tracing_max_queue_spans must be at least 1",
                          "--tracing_max_export_spans: 1 is not between 1 and "
                          "--tracing_max_queue_spans (0)",
                          "--tracing_export_interval must be positive"));
  const std::vector<SettingError> errors = ValidateSettings(settings);
  ASSERT_EQ(errors.size(), 8u);
  EXPECT_THAT(errors[0].flags, ElementsAre("tracing_endpoint", "tracing_protocol"));
  EXPECT_THAT(errors[1].flags, ElementsAre("tracing_headers"));
  EXPECT_THAT(errors[3].flags, ElementsAre("tracing_timeout"));
  EXPECT_THAT(errors[4].flags, ElementsAre("tracing_sampling_rate"));
  EXPECT_THAT(errors[5].flags, ElementsAre("tracing_max_queue_spans"));
  EXPECT_THAT(errors[6].flags, ElementsAre("tracing_max_export_spans", "tracing_max_queue_spans"));
  EXPECT_THAT(errors[7].flags, ElementsAre("tracing_export_interval"));
}

// Verifies the sampling rate's bounds: 0 and 1 are taken, NaN and a negative rate are not;
// and the batch may not exceed the queue.
TEST(SettingsTest, TracingSamplingRateAndBatchBounds) {
  Settings settings = Valid();
  settings.tracing.enabled = true;
  for (double rate : {0.0, 0.25, 1.0}) {
    settings.tracing.sampling_rate = rate;
    EXPECT_THAT(Messages(settings), IsEmpty()) << rate;
  }
  settings.tracing.sampling_rate = std::nan("");
  EXPECT_THAT(Messages(settings),
              ElementsAre("--tracing_sampling_rate: nan is not between 0 and 1"));
  settings.tracing.sampling_rate = -0.1;
  EXPECT_THAT(Messages(settings),
              ElementsAre("--tracing_sampling_rate: -0.1 is not between 0 and 1"));
  settings.tracing.sampling_rate = 1;
  settings.tracing.max_queue_spans = 100;
  settings.tracing.max_export_spans = 100;
  EXPECT_THAT(Messages(settings), IsEmpty());
  settings.tracing.max_export_spans = 101;
  EXPECT_THAT(Messages(settings),
              ElementsAre("--tracing_max_export_spans: 101 is not between 1 and "
                          "--tracing_max_queue_spans (100)"));
  settings.tracing.max_export_spans = 0;
  EXPECT_THAT(Messages(settings),
              ElementsAre("--tracing_max_export_spans: 0 is not between 1 and "
                          "--tracing_max_queue_spans (100)"));
}

// Verifies the endpoint forms each protocol takes: http the traces URL; grpc http[s]://HOST:PORT
// (a trailing '/' allowed) or HOST:PORT, never a path.
TEST(SettingsTest, TracingEndpointFormsByProtocol) {
  struct Case {
    TracingProtocol protocol;
    const char* endpoint;
    bool valid;
  };
  const Case cases[] = {
      {TracingProtocol::kHttp, "", true},
      {TracingProtocol::kHttp, "http://collector:4318/v1/traces", true},
      {TracingProtocol::kHttp, "https://otlp.example.com/v1/traces", true},
      {TracingProtocol::kHttp, "http://collector:4318", true},
      {TracingProtocol::kHttp, "collector:4318", false},
      {TracingProtocol::kHttp, "http://", false},
      {TracingProtocol::kHttp, "http:///v1/traces", false},
      {TracingProtocol::kHttp, "grpc://collector:4317", false},
      {TracingProtocol::kGrpc, "", true},
      {TracingProtocol::kGrpc, "collector:4317", true},
      {TracingProtocol::kGrpc, "http://collector:4317", true},
      {TracingProtocol::kGrpc, "https://collector:4317/", true},
      {TracingProtocol::kGrpc, "[::1]:4317", true},
      {TracingProtocol::kGrpc, "collector", false},
      {TracingProtocol::kGrpc, "http://collector", false},
      {TracingProtocol::kGrpc, "http://collector:4317/v1/traces", false},
      {TracingProtocol::kGrpc, "collector:0", false},
  };
  for (const Case& c : cases) {
    Settings settings = Valid();
    settings.tracing.enabled = true;
    settings.tracing.protocol = c.protocol;
    settings.tracing.endpoint = c.endpoint;
    EXPECT_EQ(Messages(settings).empty(), c.valid)
        << TracingProtocolName(c.protocol) << " " << c.endpoint;
  }
  Settings grpc = Valid();
  grpc.tracing.enabled = true;
  grpc.tracing.protocol = TracingProtocol::kGrpc;
  grpc.tracing.endpoint = "http://collector:4317/v1/traces";
  EXPECT_THAT(Messages(grpc),
              ElementsAre("--tracing_endpoint: 'http://collector:4317/v1/traces' is not "
                          "http[s]://HOST:PORT or HOST:PORT (--tracing_protocol=grpc)"));
}

// Verifies the names the flags spell.
TEST(SettingsTest, NamesAsTheFlagsSpellThem) {
  EXPECT_EQ(BackendKindName(BackendKind::kMemory), "memory");
  EXPECT_EQ(BackendKindName(BackendKind::kRedis), "redis");
  EXPECT_EQ(BackendKindName(BackendKind::kRedisCluster), "redis_cluster");
  EXPECT_EQ(RedisClockSourceName(RedisClockSource::kRedis), "redis");
  EXPECT_EQ(RedisClockSourceName(RedisClockSource::kLocal), "local");
  EXPECT_EQ(ConfigSourceKindName(ConfigSourceKind::kFiles), "files");
  EXPECT_EQ(ConfigSourceKindName(ConfigSourceKind::kXds), "xds");
  EXPECT_EQ(TracingProtocolName(TracingProtocol::kHttp), "http");
  EXPECT_EQ(TracingProtocolName(TracingProtocol::kGrpc), "grpc");
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Verifies --backend=memcached: servers or an SRV name (one of them), its own TLS flags, and
// the flags that need it.
TEST(SettingsTest, MemcachedSettings) {
  Settings memcached = Valid();
  memcached.backend.kind = BackendKind::kMemcached;
  memcached.backend.memcached.servers = {"10.0.0.1:11211", "[::1]:11211",
                                          "unix:/run/memcached.sock"};
  EXPECT_THAT(Messages(memcached), IsEmpty());
  memcached.backend.memcached.servers.clear();
  memcached.backend.memcached.srv = "_memcache._tcp.memcached.default.svc.cluster.local";
  memcached.backend.memcached.srv_refresh = absl::Seconds(30);
  EXPECT_THAT(Messages(memcached), IsEmpty());

  Settings none = Valid();
  none.backend.kind = BackendKind::kMemcached;
  EXPECT_THAT(Messages(none),
              ElementsAre("--backend=memcached needs --memcached_servers (HOST:PORT,...) or "
                          "--memcached_srv (_service._proto.name)"));
  Settings bad = Valid();
  bad.backend.kind = BackendKind::kMemcached;
  bad.backend.memcached.servers = {"10.0.0.1", "unix:/s"};
  bad.backend.memcached.tls = true;
  bad.backend.memcached.tls_cert = "c.pem";
  bad.backend.memcached.srv_refresh = absl::Seconds(1);
  bad.backend.per_second_kind = BackendKind::kRedis;
  EXPECT_THAT(Messages(bad),
              ElementsAre("--memcached_tls_cert and --memcached_tls_key go together (mutual TLS "
                          "to memcached)",
                          "--memcached_srv_refresh needs --memcached_srv",
                          "--memcached_servers: '10.0.0.1' is not HOST:PORT (each server is "
                          "HOST:PORT or unix:PATH)",
                          "--memcached_tls: 'unix:/s' in --memcached_servers is a unix socket; "
                          "TLS to memcached is over TCP (HOST:PORT)",
                          "--redis_per_second_backend needs --backend=redis or redis_cluster"));
  Settings port = Valid();
  port.backend.kind = BackendKind::kMemcached;
  port.backend.memcached.servers = {"m1:0", "::1:11211"};
  EXPECT_THAT(Messages(port),
              ElementsAre("--memcached_servers: 'm1:0': port '0' is not a number from 1 to 65535 "
                          "(each server is HOST:PORT or unix:PATH)",
                          "--memcached_servers: '::1:11211' is not HOST:PORT (write an IPv6 host "
                          "in brackets: [::1]:8081) (each server is HOST:PORT or unix:PATH)"));
  Settings srv = Valid();
  srv.backend.kind = BackendKind::kMemcached;
  srv.backend.memcached.srv = "memcached.local";
  EXPECT_THAT(Messages(srv),
              ElementsAre("--memcached_srv: 'memcached.local' is not an SRV name, "
                          "_service._proto.name (e.g. "
                          "_memcache._tcp.memcached.default.svc.cluster.local)"));
  Settings elsewhere = Valid();
  elsewhere.backend.memcached.servers = {"10.0.0.1:11211"};
  elsewhere.backend.memcached.tls_ca = "ca.pem";
  EXPECT_THAT(Messages(elsewhere),
              ElementsAre("--memcached_tls_ca needs --memcached_tls",
                          "--memcached_servers and --memcached_srv need --backend=memcached"));
}

// Verifies the admin API is refused without a token while an HTTP listener is reachable from
// other hosts, naming --admin_api, --admin_token_file and the listener's flag; allowed with a
// token, or on loopback; and a token file without the API is refused.
TEST(SettingsTest, AdminApiNeedsATokenOrLoopback) {
  Settings open = Valid();
  open.admin.enabled = true;
  const std::vector<SettingError> errors = ValidateSettings(open);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].flags, ElementsAre("admin_token_file", "admin_api", "http_address"));
  EXPECT_THAT(errors[0].message, ::testing::HasSubstr("--admin_api without --admin_token_file"));
  EXPECT_THAT(errors[0].message, ::testing::HasSubstr("--http_address=0.0.0.0:8080"));
  Settings loopback = open;
  loopback.http.address = "127.0.0.1:8080";
  EXPECT_THAT(Messages(loopback), IsEmpty());
  loopback.http.debug_address = "0.0.0.0:6070";
  EXPECT_THAT(Messages(loopback), ElementsAre(::testing::HasSubstr("--debug_address=0.0.0.0:6070")));
  Settings token = open;
  token.admin.token_file = "/etc/sluice/admin-token";
  EXPECT_THAT(Messages(token), IsEmpty());
  Settings off = Valid();
  off.admin.token_file = "/etc/sluice/admin-token";
  EXPECT_THAT(Messages(off),
              ElementsAre("--admin_token_file needs --admin_api (the admin API it guards is off)"));
}

}  // namespace
}  // namespace sluice
