#include "server/settings/setting_flags.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Flags as a command line sets them.
FlagTexts CommandLine(std::initializer_list<std::pair<const char*, const char*>> flags) {
  FlagTexts texts;
  for (const auto& [name, text] : flags) {
    texts[name] = FlagText{text, FlagSource::kCommandLine, ""};
  }
  return texts;
}

// Verifies each kind of flag is read into its setting: strings, numbers, durations, booleans,
// names of enumerators, and comma-separated addresses.
TEST(SettingFlagsTest, ReadsEachKindOfFlag) {
  SettingsOrErrors read = SettingsFromFlags(CommandLine({
      {"config", "/etc/sluice"},
      {"max_entries", "7"},
      {"redis_timeout", "25ms"},
      {"shadow_mode", "true"},
      {"near_limit_ratio", "0.5"},
      {"backend", "redis_cluster"},
      {"redis_addresses", "a:1,,b:2"},
      {"redis_per_second_backend", "redis"},
      {"redis_per_second_addresses", "c:3"},
      {"redis_clock", "local"},
      {"failure_mode", "local"},
      {"log_level", "warning"},
      {"log_format", "json"},
      {"healthy_with_at_least_one_config_loaded", "true"},
      {"shutdown_grace", "3s"},
      {"strict_config", "true"},
  }));
  ASSERT_THAT(read.errors, IsEmpty());
  const Settings& s = read.settings;
  EXPECT_EQ(s.config.path, "/etc/sluice");
  EXPECT_EQ(s.limiter.max_entries, 7);
  EXPECT_EQ(s.backend.shared.timeout, absl::Milliseconds(25));
  EXPECT_TRUE(s.limiter.shadow_mode);
  EXPECT_EQ(s.limiter.near_limit_ratio, 0.5);
  EXPECT_EQ(s.backend.kind, BackendKind::kRedisCluster);
  EXPECT_THAT(s.backend.redis.addresses, ElementsAre("a:1", "b:2"));
  EXPECT_EQ(s.backend.per_second_kind, BackendKind::kRedis);
  EXPECT_THAT(s.backend.per_second.addresses, ElementsAre("c:3"));
  EXPECT_EQ(s.backend.shared.clock, RedisClockSource::kLocal);
  EXPECT_EQ(s.limiter.failure_mode, FailureMode::kLocal);
  EXPECT_EQ(s.log.level, LogLevel::kWarning);
  EXPECT_EQ(s.log.format, LogFormat::kJson);
  EXPECT_TRUE(s.healthy_requires_config);
  EXPECT_EQ(s.shutdown_grace, absl::Seconds(3));
  EXPECT_TRUE(s.config.strict);
  EXPECT_FALSE(Settings().config.strict);
  // What no flag set keeps Settings' default.
  EXPECT_EQ(s.limiter.max_descriptors, 64);
  EXPECT_EQ(s.grpc.address, "0.0.0.0:8081");
}

// Verifies every value that cannot be read and every setting that is invalid is reported at
// once, and that no error follows from a value already reported as unreadable.
TEST(SettingFlagsTest, ReportsEverythingWrongAtOnce) {
  SettingsOrErrors read = SettingsFromFlags(CommandLine({
      {"backend", "mongo"},
      {"redis_per_second_backend", "redis"},  // would need a Redis --backend: not reported
      {"max_entries", "lots"},
      {"log_level", "loud"},
      {"failure_mode", "panic"},
      {"redis_clock", "sundial"},
      {"redis_per_second_connections", "0"},
      {"replicas_hint", "0"},
      {"no_such_flag", "1"},
  }));
  EXPECT_THAT(read.errors,
              ElementsAre("--no_such_flag: no setting reads this flag",
                          "--backend: 'mongo' is not memory, redis, redis_cluster or memcached",
                          "--redis_clock: 'sundial' is not redis or local",
                          "--failure_mode: 'panic' is not allow, deny or local",
                          "--log_level: 'loud' is not debug, info, warning or error",
                          "Illegal value 'lots' specified for flag 'max_entries'",
                          "--config is required (a YAML file or a directory of them; or "
                          "envoyproxy/ratelimit's RUNTIME_ROOT and friends; or "
                          "--config_source=xds)",
                          "--replicas_hint must be at least 1"));
}

// Verifies the xDS flags: the source's name, and the key-value lists of the node's metadata
// and the stream's headers, refused with the flag's name when an item has no key.
TEST(SettingFlagsTest, ReadsTheXdsFlags) {
  SettingsOrErrors read = SettingsFromFlags(CommandLine({
      {"config_source", "xds"},
      {"xds_server", "eg:18001"},
      {"xds_node_metadata", "zone=a, team = payments ,"},
      {"xds_headers", "x-token:abc:def"},
      {"xds_backoff_initial", "2s"},
  }));
  ASSERT_THAT(read.errors, IsEmpty());
  const XdsSettings& xds = read.settings.config.xds;
  EXPECT_EQ(read.settings.config.source, ConfigSourceKind::kXds);
  EXPECT_EQ(xds.server, "eg:18001");
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(xds.node_metadata, (Pairs{{"zone", "a"}, {"team", "payments"}}));
  EXPECT_EQ(xds.headers, (Pairs{{"x-token", "abc:def"}}));
  EXPECT_EQ(xds.backoff_initial, absl::Seconds(2));

  read = SettingsFromFlags(CommandLine({{"config_source", "grpc"},
                                        {"xds_node_metadata", "zone"},
                                        {"xds_headers", ":v"}}));
  EXPECT_THAT(read.errors, ElementsAre("--config_source: 'grpc' is not files or xds",
                                       "--xds_node_metadata: 'zone' is not key=value",
                                       "--xds_headers: ':v' is not key:value",
                                       ::testing::HasSubstr("--config is required")));
}

// Verifies every tracing flag is read into its setting, the protocol by name and the headers
// as name=value pairs.
TEST(SettingFlagsTest, ReadsTheTracingFlags) {
  SettingsOrErrors read = SettingsFromFlags(CommandLine({
      {"config", "/etc/sluice"},
      {"tracing", "true"},
      {"tracing_protocol", "grpc"},
      {"tracing_endpoint", "collector:4317"},
      {"tracing_insecure", "true"},
      {"tracing_headers", "api-key=s3cr=t, x-team = payments"},
      {"tracing_ca", "/etc/otel/ca.pem"},
      {"tracing_timeout", "2500ms"},
      {"tracing_sampling_rate", "0.25"},
      {"tracing_service_name", "envoy-ratelimit"},
      {"tracing_service_namespace", "envoy-gateway-system"},
      {"tracing_service_instance_id", "pod-1"},
      {"tracing_descriptor_values", "true"},
      {"tracing_max_queue_spans", "4096"},
      {"tracing_max_export_spans", "1024"},
      {"tracing_export_interval", "1s"},
  }));
  ASSERT_THAT(read.errors, IsEmpty());
  const TracingSettings& t = read.settings.tracing;
  EXPECT_TRUE(t.enabled);
  EXPECT_EQ(t.protocol, TracingProtocol::kGrpc);
  EXPECT_EQ(t.endpoint, "collector:4317");
  EXPECT_TRUE(t.insecure);
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(t.headers, (Pairs{{"api-key", "s3cr=t"}, {"x-team", "payments"}}));
  EXPECT_EQ(t.ca, "/etc/otel/ca.pem");
  EXPECT_EQ(t.timeout, absl::Milliseconds(2500));
  EXPECT_EQ(t.sampling_rate, 0.25);
  EXPECT_EQ(t.service_name, "envoy-ratelimit");
  EXPECT_EQ(t.service_namespace, "envoy-gateway-system");
  EXPECT_EQ(t.service_instance_id, "pod-1");
  EXPECT_TRUE(t.descriptor_values);
  EXPECT_EQ(t.max_queue_spans, 4096);
  EXPECT_EQ(t.max_export_spans, 1024);
  EXPECT_EQ(t.export_interval, absl::Seconds(1));
  // Unset: Settings' defaults.
  read = SettingsFromFlags(CommandLine({{"config", "/etc/sluice"}}));
  EXPECT_FALSE(read.settings.tracing.enabled);
  EXPECT_EQ(read.settings.tracing.protocol, TracingProtocol::kHttp);
  EXPECT_EQ(read.settings.tracing.service_name, "sluice");
}

// Verifies a tracing flag that cannot be read, or a tracing setting that is wrong, is an error
// naming its flag (and the variable that set it); the same values with --tracing off are unused.
TEST(SettingFlagsTest, TracingErrorsNameTheirFlags) {
  FlagTexts flags = CommandLine({{"config", "/etc/sluice"},
                                 {"tracing", "true"},
                                 {"tracing_protocol", "udp"},
                                 {"tracing_headers", "api-key"},
                                 {"tracing_sampling_rate", "lots"},
                                 {"tracing_max_export_spans", "0"}});
  EXPECT_THAT(SettingsFromFlags(flags).errors,
              ElementsAre("--tracing_protocol: 'udp' is not http or grpc",
                          "--tracing_headers: 'api-key' is not key=value",
                          "Illegal value 'lots' specified for flag 'tracing_sampling_rate'",
                          "--tracing_max_export_spans: 0 is not between 1 and "
                          "--tracing_max_queue_spans (2048)"));

  flags = CommandLine({{"config", "/etc/sluice"}, {"tracing", "true"}});
  flags["tracing_endpoint"] = FlagText{"collector:4318/v1/traces", FlagSource::kUpstream,
                                       "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"};
  EXPECT_THAT(SettingsFromFlags(flags).errors,
              ElementsAre(HasSubstr("(--tracing_endpoint set by "
                                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")));

  flags = CommandLine({{"config", "/etc/sluice"},
                       {"tracing", "false"},
                       {"tracing_endpoint", "collector:4318"},
                       {"tracing_timeout", "0s"},
                       {"tracing_sampling_rate", "2"}});
  EXPECT_THAT(SettingsFromFlags(flags).errors, IsEmpty());
}

// Verifies the Redis TLS flags: each target's switch into its own settings, the shared files
// and names into the settings both Redis share.
TEST(SettingFlagsTest, ReadsTheRedisTlsFlags) {
  SettingsOrErrors read = SettingsFromFlags(CommandLine({
      {"config", "/etc/sluice"},
      {"backend", "redis"},
      {"redis_addresses", "10.0.0.1:6380"},
      {"redis_tls", "true"},
      {"redis_per_second_backend", "redis_cluster"},
      {"redis_per_second_addresses", "10.0.0.2:6380"},
      {"redis_per_second_tls", "true"},
      {"redis_tls_ca", "/certs/ca.crt"},
      {"redis_tls_cert", "/certs/tls.crt"},
      {"redis_tls_key", "/certs/tls.key"},
      {"redis_tls_server_name", "redis.internal"},
      {"redis_tls_skip_hostname_verification", "true"},
  }));
  ASSERT_THAT(read.errors, IsEmpty());
  const BackendSettings& backend = read.settings.backend;
  EXPECT_TRUE(backend.redis.tls);
  EXPECT_TRUE(backend.per_second.tls);
  EXPECT_EQ(backend.shared.tls_ca, "/certs/ca.crt");
  EXPECT_EQ(backend.shared.tls_cert, "/certs/tls.crt");
  EXPECT_EQ(backend.shared.tls_key, "/certs/tls.key");
  EXPECT_EQ(backend.shared.tls_server_name, "redis.internal");
  EXPECT_TRUE(backend.shared.tls_skip_hostname_verification);

  // Each switch alone: the other Redis stays plaintext. Unset, all are off.
  read = SettingsFromFlags(CommandLine({{"config", "/etc/sluice"},
                                        {"redis_per_second_tls", "true"}}));
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_FALSE(read.settings.backend.redis.tls);
  EXPECT_TRUE(read.settings.backend.per_second.tls);
  read = SettingsFromFlags(CommandLine({{"config", "/etc/sluice"}, {"redis_tls", "true"}}));
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_TRUE(read.settings.backend.redis.tls);
  EXPECT_FALSE(read.settings.backend.per_second.tls);
  EXPECT_FALSE(read.settings.backend.shared.tls_skip_hostname_verification);

  read = SettingsFromFlags(CommandLine({{"config", "/etc/sluice"}, {"redis_tls", "maybe"}}));
  EXPECT_THAT(read.errors, ElementsAre("Illegal value 'maybe' specified for flag 'redis_tls'"));
}

// Verifies a TLS error about flags upstream's variables set names those variables.
TEST(SettingFlagsTest, RedisTlsErrorsNameTheUpstreamVariables) {
  FlagTexts flags = CommandLine({{"config", "/etc/sluice"}});
  flags["backend"] = FlagText{"redis", FlagSource::kUpstream, "REDIS_URL"};
  flags["redis_addresses"] =
      FlagText{"unix:/var/run/nutcracker/ratelimit.sock", FlagSource::kUpstream,
               "upstream's default REDIS_URL"};
  flags["redis_tls"] = FlagText{"true", FlagSource::kUpstream, "REDIS_TLS"};
  flags["redis_tls_cert"] = FlagText{"/certs/tls.crt", FlagSource::kUpstream,
                                     "REDIS_TLS_CLIENT_CERT"};
  EXPECT_THAT(
      SettingsFromFlags(flags).errors,
      ElementsAre("--redis_tls: 'unix:/var/run/nutcracker/ratelimit.sock' in --redis_addresses "
                  "is a unix socket; TLS to Redis is over TCP (HOST:PORT) (--redis_tls set by "
                  "REDIS_TLS; --redis_addresses set by upstream's default REDIS_URL)",
                  "--redis_tls_cert and --redis_tls_key go together (mutual TLS to Redis) "
                  "(--redis_tls_cert set by REDIS_TLS_CLIENT_CERT)"));
}

// Verifies each Sentinel flag, main and per-second, is read into its own target's settings,
// the sentinels split at commas with blanks around each dropped.
TEST(SettingFlagsTest, ReadsTheRedisSentinelFlags) {
  SettingsOrErrors read = SettingsFromFlags(CommandLine({
      {"config", "/etc/sluice"},
      {"backend", "redis"},
      {"redis_sentinels", "10.0.0.1:26379, 10.0.0.2:26379 ,,10.0.0.3:26379"},
      {"redis_sentinel_master", "mymaster"},
      {"redis_sentinel_username", "watcher"},
      {"redis_sentinel_password", "s3cret"},
      {"redis_per_second_backend", "redis"},
      {"redis_per_second_sentinels", "10.0.1.1:26379"},
      {"redis_per_second_sentinel_master", "fastmaster"},
      {"redis_per_second_sentinel_username", "fastwatcher"},
      {"redis_per_second_sentinel_password", "f4st"},
  }));
  ASSERT_THAT(read.errors, IsEmpty());
  const RedisTargetSettings& redis = read.settings.backend.redis;
  EXPECT_THAT(redis.sentinels, ElementsAre("10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"));
  EXPECT_EQ(redis.sentinel_master, "mymaster");
  EXPECT_EQ(redis.sentinel_username, "watcher");
  EXPECT_EQ(redis.sentinel_password, "s3cret");
  // The default address stays, unused.
  EXPECT_THAT(redis.addresses, ElementsAre("127.0.0.1:6379"));
  const RedisTargetSettings& per_second = read.settings.backend.per_second;
  EXPECT_THAT(per_second.sentinels, ElementsAre("10.0.1.1:26379"));
  EXPECT_EQ(per_second.sentinel_master, "fastmaster");
  EXPECT_EQ(per_second.sentinel_username, "fastwatcher");
  EXPECT_EQ(per_second.sentinel_password, "f4st");
  EXPECT_THAT(per_second.addresses, IsEmpty());

  // Unset or empty: no Sentinel.
  read = SettingsFromFlags(CommandLine({{"config", "/etc/sluice"}, {"redis_sentinels", " , "}}));
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_THAT(read.settings.backend.redis.sentinels, IsEmpty());
  EXPECT_EQ(read.settings.backend.redis.sentinel_master, "");
}

// Verifies --redis_addresses given beside --redis_sentinels (and the per-second twins) is an
// error naming both, and the variables that set them; left at its default, it is not.
TEST(SettingFlagsTest, SentinelsAndGivenAddressesAreExclusive) {
  FlagTexts flags = CommandLine({{"config", "/etc/sluice"},
                                 {"backend", "redis"},
                                 {"redis_sentinels", "10.0.0.1:26379"},
                                 {"redis_sentinel_master", "mymaster"}});
  EXPECT_THAT(SettingsFromFlags(flags).errors, IsEmpty());
  flags["redis_addresses"] = FlagText{"10.0.0.9:6379", FlagSource::kCommandLine, ""};
  EXPECT_THAT(SettingsFromFlags(flags).errors,
              ElementsAre("--redis_addresses and --redis_sentinels are exclusive: with Sentinel "
                          "the sentinels name the master; give one or the other"));
  // Even given as its default value: whoever wrote it means that server.
  flags["redis_addresses"].text = "127.0.0.1:6379";
  EXPECT_THAT(SettingsFromFlags(flags).errors, ElementsAre(HasSubstr("are exclusive")));
  // Emptied sentinels leave the addresses in force.
  flags["redis_sentinels"].text = "";
  flags["redis_sentinel_master"].text = "";
  EXPECT_THAT(SettingsFromFlags(flags).errors, IsEmpty());

  flags = CommandLine({{"config", "/etc/sluice"},
                       {"backend", "redis"},
                       {"redis_per_second_backend", "redis"},
                       {"redis_per_second_addresses", "10.0.0.9:6379"}});
  flags["redis_per_second_sentinels"] =
      FlagText{"10.0.1.1:26379", FlagSource::kUpstream, "REDIS_PERSECOND_URL"};
  flags["redis_per_second_sentinel_master"] =
      FlagText{"fastmaster", FlagSource::kUpstream, "REDIS_PERSECOND_URL"};
  EXPECT_THAT(SettingsFromFlags(flags).errors,
              ElementsAre("--redis_per_second_addresses and --redis_per_second_sentinels are "
                          "exclusive: with Sentinel the sentinels name the master; give one or "
                          "the other (--redis_per_second_sentinels set by REDIS_PERSECOND_URL)"));

  // A Redis not in use reads neither.
  flags = CommandLine({{"config", "/etc/sluice"},
                       {"redis_addresses", "10.0.0.9:6379"},
                       {"redis_sentinels", "10.0.0.1:26379"},
                       {"redis_sentinel_master", "mymaster"},
                       {"redis_per_second_addresses", "10.0.0.9:6379"},
                       {"redis_per_second_sentinels", "10.0.1.1:26379"}});
  EXPECT_THAT(SettingsFromFlags(flags).errors, IsEmpty());
}

// Verifies a message about a flag an envoyproxy/ratelimit variable set names the variable too.
TEST(SettingFlagsTest, NamesTheUpstreamVariableThatSetAFlag) {
  FlagTexts flags = CommandLine({{"config", "/etc/sluice"}, {"redis_db", "3"}});
  flags["backend"] = FlagText{"redis_cluster", FlagSource::kUpstream, "REDIS_TYPE"};
  flags["redis_addresses"] = FlagText{"", FlagSource::kUpstream, "REDIS_URL, REDIS_SOCKET_TYPE"};
  flags["max_descriptors"] = FlagText{"0", FlagSource::kEnvironment, "SLUICE_MAX_DESCRIPTORS"};
  EXPECT_THAT(SettingsFromFlags(flags).errors,
              ElementsAre("--redis_db: a Redis Cluster has only database 0 (--backend set by "
                          "REDIS_TYPE)",
                          "--redis_addresses: no address (--redis_addresses set by REDIS_URL, "
                          "REDIS_SOCKET_TYPE)",
                          "--max_descriptors must be at least 1"));
}

// Verifies texts are normalised as the flag prints its value, and refused in abseil's words.
TEST(SettingFlagsTest, NormalizesTextsAsTheFlagPrintsThem) {
  std::string normalized;
  std::string error;
  ASSERT_TRUE(NormalizeFlagText("max_entries", "0100", &normalized, &error));
  EXPECT_EQ(normalized, "100");
  ASSERT_TRUE(NormalizeFlagText("shadow_mode", "yes", &normalized, &error));
  EXPECT_EQ(normalized, "true");
  ASSERT_TRUE(NormalizeFlagText("redis_timeout", "0.5s", &normalized, &error));
  EXPECT_EQ(normalized, "500ms");
  ASSERT_TRUE(NormalizeFlagText("backend", "mongo", &normalized, &error));  // a string flag
  EXPECT_EQ(normalized, "mongo");
  EXPECT_FALSE(NormalizeFlagText("max_entries", "lots", &normalized, &error));
  EXPECT_EQ(error, "Illegal value 'lots' specified for flag 'max_entries'");
}

// Verifies the statsd flags are read into their settings (off by default), and what
// ValidateSettings refuses of them is refused, naming the flag.
TEST(SettingFlagsTest, ReadsStatsdFlags) {
  EXPECT_TRUE(Settings().statsd.address.empty());
  SettingsOrErrors read = SettingsFromFlags(CommandLine({
      {"config", "/c"},
      {"statsd_address", "127.0.0.1:8125"},
      {"statsd_protocol", "tcp"},
      {"statsd_dogstatsd", "true"},
      {"statsd_flush_interval", "2s"},
      {"statsd_extra_tags", "cluster:eu, version:1.2"},
      {"statsd_dogstatsd_tags", "env:prod,team"},
      {"statsd_mogrifiers", "[{pattern: '^a\\.(.*)$', name: 'a', tags: 'k:$1'}]"},
  }));
  ASSERT_THAT(read.errors, IsEmpty());
  const StatsdSettings& statsd = read.settings.statsd;
  EXPECT_EQ(statsd.address, "127.0.0.1:8125");
  EXPECT_EQ(statsd.protocol, StatsdSettings::Protocol::kTcp);
  EXPECT_TRUE(statsd.dogstatsd);
  EXPECT_EQ(statsd.flush_interval, absl::Seconds(2));
  EXPECT_THAT(statsd.extra_tags, ElementsAre(std::make_pair("cluster", "eu"),
                                             std::make_pair("version", "1.2")));
  EXPECT_THAT(statsd.dogstatsd_tags, ElementsAre("env:prod", "team"));
  ASSERT_EQ(statsd.mogrifiers.size(), 1u);
  EXPECT_EQ(statsd.mogrifiers[0].pattern, "^a\\.(.*)$");

  EXPECT_THAT(SettingsFromFlags(CommandLine({{"config", "/c"}, {"statsd_protocol", "quic"}})).errors,
              ElementsAre("--statsd_protocol: 'quic' is not udp or tcp"));
  EXPECT_THAT(SettingsFromFlags(CommandLine({{"config", "/c"}, {"statsd_address", "statsd"}})).errors,
              ElementsAre("--statsd_address: 'statsd' is not HOST:PORT"));
  EXPECT_THAT(SettingsFromFlags(CommandLine({{"config", "/c"},
                                             {"statsd_address", "h:1"},
                                             {"statsd_flush_interval", "0s"}}))
                  .errors,
              ElementsAre("--statsd_flush_interval must be at least 1ms"));
  EXPECT_THAT(SettingsFromFlags(CommandLine({{"config", "/c"},
                                             {"statsd_address", "h:1"},
                                             {"statsd_dogstatsd_tags", "env:prod"},
                                             {"statsd_mogrifiers", "[{pattern: x, name: y}]"}}))
                  .errors,
              ElementsAre(HasSubstr("--statsd_mogrifiers needs --statsd_dogstatsd"),
                          HasSubstr("--statsd_dogstatsd_tags needs --statsd_dogstatsd")));
  EXPECT_THAT(SettingsFromFlags(CommandLine({{"config", "/c"}, {"statsd_mogrifiers", "[{pattern: x}]"}})).errors,
              ElementsAre("--statsd_mogrifiers: mogrifier 1: no name"));
}

// Verifies the list of flags holds each one once, and IsSettingFlag agrees with it.
TEST(SettingFlagsTest, ListsEveryFlagOnce) {
  const std::vector<std::string> names = SettingFlagNames();
  EXPECT_EQ(names.size(), std::set<std::string>(names.begin(), names.end()).size());
  EXPECT_THAT(names, Contains("grpc_address"));
  EXPECT_THAT(names, Contains("healthy_with_at_least_one_config_loaded"));
  EXPECT_THAT(names, Contains("tracing_export_interval"));
  for (const std::string& name : names) {
    EXPECT_TRUE(IsSettingFlag(name)) << name;
  }
  EXPECT_FALSE(IsSettingFlag("grpc_addresses"));
}

}  // namespace
}  // namespace sluice
