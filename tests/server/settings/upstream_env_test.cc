#include "server/settings/upstream_env.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

class UpstreamEnvTest : public ::testing::Test {
 protected:
  // The translation of `env`, without what every translation of some variable brings along
  // where upstream's variables do not say otherwise (its charging, its statsd sink: assignments
  // whose source is "envoyproxy/ratelimit's default (...)"), which the tests of each check on
  // TranslateAll's.
  UpstreamTranslation Translate(std::map<std::string, std::string> env) {
    UpstreamTranslation t = TranslateAll(std::move(env));
    t.flags.erase(std::remove_if(t.flags.begin(), t.flags.end(),
                                 [](const FlagAssignment& a) {
                                   return absl::StartsWith(a.source,
                                                           "envoyproxy/ratelimit's default");
                                 }),
                  t.flags.end());
    return t;
  }

  UpstreamTranslation TranslateAll(std::map<std::string, std::string> env) {
    env_ = std::move(env);
    return TranslateUpstreamEnvironment([this](absl::string_view name) -> std::optional<std::string> {
      auto it = env_.find(std::string(name));
      if (it == env_.end()) {
        return std::nullopt;
      }
      return it->second;
    });
  }

  // "flag=value" for every assignment, in order.
  static std::vector<std::string> Flags(const UpstreamTranslation& t) {
    std::vector<std::string> out;
    for (const FlagAssignment& a : t.flags) {
      out.push_back(a.flag + "=" + a.value);
    }
    return out;
  }

  // The value given to `flag`, or "unset".
  static std::string Flag(const UpstreamTranslation& t, absl::string_view flag) {
    std::string value = "unset";
    for (const FlagAssignment& a : t.flags) {
      if (a.flag == flag) {
        value = a.value;
      }
    }
    return value;
  }

  // The source of the value given to `flag`, or "unset".
  static std::string Source(const UpstreamTranslation& t, absl::string_view flag) {
    std::string source = "unset";
    for (const FlagAssignment& a : t.flags) {
      if (a.flag == flag) {
        source = a.source;
      }
    }
    return source;
  }

  std::map<std::string, std::string> env_;
};

// Verifies upstream's charging: a deployment configured by upstream's variables charges every
// hit, admitted or not (increment first), unless STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true;
// without any upstream variable Sluice's own default stays.
TEST_F(UpstreamEnvTest, UpstreamChargesAlwaysUnlessStopped) {
  EXPECT_EQ(Flag(TranslateAll({{"REDIS_URL", "r:6379"}}), "default_charge_fixed_window"), "always");
  EXPECT_EQ(Flag(TranslateAll({{"LOG_LEVEL", "debug"}}), "default_charge_fixed_window"), "always");
  EXPECT_EQ(Flag(TranslateAll({{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"}}),
                 "default_charge_fixed_window"),
            "always");
  UpstreamTranslation stopped =
      TranslateAll({{"REDIS_SOCKET_TYPE", "tcp"},
                    {"REDIS_URL", "r:6379"},
                    {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"}});
  EXPECT_EQ(Flag(stopped, "default_charge_fixed_window"), "if_admitted");
  EXPECT_THAT(Flags(Translate({{"REDIS_SOCKET_TYPE", "tcp"},
                               {"REDIS_URL", "r:6379"},
                               {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"}})),
              ElementsAre("backend=redis", "redis_addresses=r:6379",
                          "default_charge_fixed_window=if_admitted",
                          "request_all_or_nothing=true"));
  UpstreamTranslation plain = TranslateAll({{"REDIS_URL", "r:6379"}});
  for (const FlagAssignment& a : plain.flags) {
    if (a.flag == "default_charge_fixed_window") {
      EXPECT_EQ(a.source,
                "envoyproxy/ratelimit's default (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT unset)");
    }
  }
  EXPECT_EQ(Flag(TranslateAll({{"PATH", "/bin"}}), "default_charge_fixed_window"), "unset");
  // What upstream's users asked of it (envoyproxy/ratelimit#427): a request one of whose
  // descriptors is over consumes nothing from the others.
  EXPECT_EQ(Flag(stopped, "request_all_or_nothing"), "true");
  EXPECT_EQ(Flag(plain, "request_all_or_nothing"), "unset");
}

// Verifies a Redis under upstream's variables keeps fixed windows in upstream's keys (so that a
// fleet moving over replica by replica counts each window once), with upstream's empty prefix
// and its 300 s of TTL jitter unless CACHE_KEY_PREFIX and EXPIRATION_JITTER_MAX_SECONDS say
// otherwise; without a Redis variable (the memory backend) none of it.
TEST_F(UpstreamEnvTest, RedisKeepsUpstreamsKeys) {
  UpstreamTranslation t = TranslateAll({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "r:6379"}});
  EXPECT_EQ(Flag(t, "redis_key_layout"), "upstream");
  EXPECT_EQ(Flag(t, "redis_key_prefix"), "");
  EXPECT_EQ(Flag(t, "redis_expiration_jitter"), "300s");
  EXPECT_EQ(Source(t, "redis_expiration_jitter"),
            "envoyproxy/ratelimit's default (EXPIRATION_JITTER_MAX_SECONDS unset: 300)");
  t = TranslateAll({{"REDIS_TYPE", "cluster"},
                    {"REDIS_URL", "a:1,b:2"},
                    {"CACHE_KEY_PREFIX", "rl_"},
                    {"EXPIRATION_JITTER_MAX_SECONDS", "0"}});
  EXPECT_EQ(Flag(t, "redis_key_layout"), "upstream");
  EXPECT_EQ(Flag(t, "redis_key_prefix"), "rl_");
  EXPECT_EQ(Flag(t, "redis_expiration_jitter"), "0s");
  EXPECT_THAT(t.warnings, IsEmpty());
  t = TranslateAll({{"LOG_LEVEL", "info"}});
  EXPECT_EQ(Flag(t, "redis_key_layout"), "unset");
  EXPECT_THAT(TranslateAll({{"REDIS_URL", "r:1"}, {"EXPIRATION_JITTER_MAX_SECONDS", "x"}}).errors,
              SizeIs(1));
}

// Verifies upstream's defaults that are Sluice options: no local over-limit cache unless
// LOCAL_CACHE_SIZE_IN_BYTES asks for one, and USE_CALENDAR_MONTH_RATE_LIMIT's calendar months.
TEST_F(UpstreamEnvTest, LocalCacheOffAndCalendarMonths) {
  UpstreamTranslation t = TranslateAll({{"REDIS_URL", "r:6379"}});
  EXPECT_EQ(Flag(t, "over_limit_cache_keys"), "0");
  EXPECT_EQ(Source(t, "over_limit_cache_keys"),
            "envoyproxy/ratelimit's default (LOCAL_CACHE_SIZE_IN_BYTES unset: no local cache)");
  EXPECT_EQ(Flag(t, "calendar_months"), "unset");
  t = TranslateAll({{"REDIS_URL", "r:6379"},
                    {"LOCAL_CACHE_SIZE_IN_BYTES", "1024"},
                    {"USE_CALENDAR_MONTH_RATE_LIMIT", "true"}});
  EXPECT_EQ(Flag(t, "over_limit_cache_keys"), "8");
  EXPECT_EQ(Flag(t, "calendar_months"), "true");
  EXPECT_EQ(Source(t, "calendar_months"), "USE_CALENDAR_MONTH_RATE_LIMIT");
}

// Verifies nothing set means nothing translated: Sluice's own defaults stay.
TEST_F(UpstreamEnvTest, NothingSetIsEmpty) {
  UpstreamTranslation t = Translate({{"PATH", "/bin"}, {"PORT", ""}});
  EXPECT_THAT(t.flags, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_FALSE(t.upstream_environment);
}

// Verifies any one of upstream's own variables makes the environment upstream's, whether it is
// honoured, only warned about, or refused.
TEST_F(UpstreamEnvTest, AnyOwnVariableIsUpstreamEnvironment) {
  for (const char* variable :
       {"LOG_LEVEL", "REDIS_URL", "RUNTIME_ROOT", "USE_STATSD", "EXPIRATION_JITTER_MAX_SECONDS"}) {
    EXPECT_TRUE(TranslateAll({{variable, "1"}}).upstream_environment) << variable;
  }
  EXPECT_TRUE(TranslateAll({{"BACKEND_TYPE", "memcache"}}).upstream_environment);
}

// Verifies the listeners: host/port pairs with upstream's defaults for the missing half, IPv6
// brackets, and GRPC_UDS winning over GRPC_HOST/GRPC_PORT.
TEST_F(UpstreamEnvTest, Listeners) {
  UpstreamTranslation t =
      Translate({{"PORT", "9000"}, {"GRPC_HOST", "::1"}, {"DEBUG_HOST", "127.0.0.1"}});
  EXPECT_THAT(Flags(t), ElementsAre("http_address=0.0.0.0:9000", "grpc_address=[::1]:8081",
                                    "debug_address=127.0.0.1:6070"));
  EXPECT_EQ(t.flags[0].source, "PORT");  // HOST is not set: not named

  t = Translate({{"GRPC_UDS", "/run/rl.sock"}, {"GRPC_PORT", "1"}});
  EXPECT_EQ(Flag(t, "grpc_address"), "unix:/run/rl.sock");

  t = Translate({{"PORT", "http"}, {"GRPC_PORT", "70000"}});
  EXPECT_THAT(t.errors, ElementsAre("PORT=http: not a whole number from 0 to 65535",
                                    "GRPC_PORT=70000: not a whole number from 0 to 65535"));
}

// Verifies logrus' level names map onto Sluice's, case-insensitively, and bad ones are errors.
TEST_F(UpstreamEnvTest, LogLevelAndFormat) {
  const std::pair<const char*, const char*> levels[] = {
      {"TRACE", "debug"}, {"debug", "debug"}, {"Info", "info"},   {"WARN", "warning"},
      {"warning", "warning"}, {"error", "error"}, {"fatal", "error"}, {"panic", "error"}};
  for (const auto& [upstream, sluice] : levels) {
    EXPECT_EQ(Flag(Translate({{"LOG_LEVEL", upstream}}), "log_level"), sluice) << upstream;
  }
  EXPECT_THAT(Translate({{"LOG_LEVEL", "loud"}}).errors, ElementsAre(HasSubstr("LOG_LEVEL=loud")));
  EXPECT_EQ(Flag(Translate({{"LOG_FORMAT", "JSON"}}), "log_format"), "json");
  EXPECT_THAT(Translate({{"LOG_FORMAT", "xml"}}).errors,
              ElementsAre("LOG_FORMAT=xml: not text or json"));
}

// Verifies what a deployment configured by upstream's variables gets where it sets none of them,
// as upstream's settings.go defaults them: WARN logging, connection age 24h and grace 1h, health
// waiting for Redis (1s, 30s, forever), the debug port 0.0.0.0:6070, whose failure to listen is
// only logged. Each names itself upstream's default; a variable set replaces its default; and
// without any upstream variable none applies.
TEST_F(UpstreamEnvTest, UpstreamDefaults) {
  UpstreamTranslation t = TranslateAll({{"REDIS_URL", "r:6379"}});
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_EQ(Flag(t, "log_level"), "warning");
  EXPECT_EQ(Source(t, "log_level"), "envoyproxy/ratelimit's default (LOG_LEVEL unset: WARN)");
  EXPECT_EQ(Flag(t, "grpc_max_connection_age"), "24h");
  EXPECT_EQ(Source(t, "grpc_max_connection_age"),
            "envoyproxy/ratelimit's default (GRPC_MAX_CONNECTION_AGE unset: 24h)");
  EXPECT_EQ(Flag(t, "grpc_max_connection_age_grace"), "1h");
  EXPECT_EQ(Flag(t, "wait_for_backend"), "true");
  EXPECT_EQ(Flag(t, "wait_for_backend_initial_interval"), "1s");
  EXPECT_EQ(Flag(t, "wait_for_backend_max_interval"), "30s");
  EXPECT_EQ(Flag(t, "wait_for_backend_max_elapsed"), "0s");
  EXPECT_EQ(Flag(t, "debug_address"), "0.0.0.0:6070");
  EXPECT_EQ(Source(t, "debug_address"),
            "envoyproxy/ratelimit's default (DEBUG_HOST, DEBUG_PORT unset: 0.0.0.0, 6070)");
  EXPECT_EQ(Flag(t, "debug_address_required"), "false");

  // Set, a variable is mapped instead of its default (and named as the source).
  t = TranslateAll({{"LOG_LEVEL", "debug"},
                    {"GRPC_MAX_CONNECTION_AGE", "30m"},
                    {"DEBUG_PORT", "7070"}});
  EXPECT_EQ(Flag(t, "log_level"), "debug");
  EXPECT_EQ(Source(t, "log_level"), "LOG_LEVEL");
  EXPECT_EQ(Flag(t, "grpc_max_connection_age"), "30m");
  EXPECT_EQ(Flag(t, "grpc_max_connection_age_grace"), "1h");
  EXPECT_EQ(Flag(t, "debug_address"), "0.0.0.0:7070");
  EXPECT_EQ(Source(t, "debug_address"), "DEBUG_PORT");
  EXPECT_EQ(Flag(t, "debug_address_required"), "false");

  // Not upstream's environment: Sluice's own defaults stay.
  t = TranslateAll({{"PATH", "/bin"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}});
  for (absl::string_view flag : {"log_level", "grpc_max_connection_age", "wait_for_backend",
                                 "debug_address", "debug_address_required"}) {
    EXPECT_EQ(Flag(t, flag), "unset") << flag;
  }
}

// Verifies GRPC_MAX_CONNECTION_AGE and _GRACE (Go durations, 0 meaning no limit, as upstream's
// gRPC server reads them) and the REDIS_STARTUP_* schedule map onto their flags as they are,
// with no warning; a value that is not a duration is named by its variable (LayerFlags' check).
TEST_F(UpstreamEnvTest, ConnectionAgeAndStartupWait) {
  UpstreamTranslation t = Translate({{"GRPC_MAX_CONNECTION_AGE", "1s"},
                                     {"GRPC_MAX_CONNECTION_AGE_GRACE", "0"},
                                     {"REDIS_STARTUP_INITIAL_INTERVAL", "250ms"},
                                     {"REDIS_STARTUP_MAX_INTERVAL", "1m"},
                                     {"REDIS_STARTUP_MAX_ELAPSED_TIME", "2m30s"}});
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("grpc_max_connection_age=1s",
                                    "grpc_max_connection_age_grace=0",
                                    "wait_for_backend_initial_interval=250ms",
                                    "wait_for_backend_max_interval=1m",
                                    "wait_for_backend_max_elapsed=2m30s"));
  EXPECT_EQ(t.flags[0].source, "GRPC_MAX_CONNECTION_AGE");
  EXPECT_EQ(t.flags[4].source, "REDIS_STARTUP_MAX_ELAPSED_TIME");
  // The wait itself is upstream's default behaviour, on whatever the schedule.
  EXPECT_EQ(Flag(TranslateAll({{"REDIS_STARTUP_MAX_ELAPSED_TIME", "5s"}}), "wait_for_backend"),
            "true");
}

// Verifies the runtime layout becomes one recursive config directory, with upstream's defaults
// for unset parts, an empty subdirectory skipped and dot files kept unless asked.
TEST_F(UpstreamEnvTest, RuntimeDirectory) {
  UpstreamTranslation t = Translate({{"RUNTIME_ROOT", "/data/"},
                                     {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                                     {"RUNTIME_IGNOREDOTFILES", "true"},
                                     {"RUNTIME_WATCH_ROOT", "false"}});
  EXPECT_THAT(Flags(t), ElementsAre("config=/data/ratelimit/config", "config_recursive=true",
                                    "config_ignore_dot_files=true"));
  EXPECT_THAT(t.errors, IsEmpty());

  t = Translate({{"RUNTIME_ROOT", "/data"}, {"RUNTIME_APPDIRECTORY", "limits"}});
  EXPECT_EQ(Flag(t, "config"), "/data/limits");
  EXPECT_EQ(Flag(t, "config_ignore_dot_files"), "false");

  t = Translate({{"RUNTIME_SUBDIRECTORY", "rl"}});
  EXPECT_EQ(Flag(t, "config"), "/srv/runtime_data/current/rl/config");

  EXPECT_THAT(Translate({{"RUNTIME_WATCH_ROOT", "maybe"}}).errors,
              ElementsAre("RUNTIME_WATCH_ROOT=maybe: not a boolean (true or false)"));
  EXPECT_THAT(Translate({{"CONFIG_TYPE", "file"}}).errors, IsEmpty());
  EXPECT_THAT(Translate({{"CONFIG_TYPE", "yaml"}}).errors,
              ElementsAre("CONFIG_TYPE=yaml: not FILE or GRPC_XDS_SOTW"));
}

// Verifies Envoy Gateway's xDS environment: the config source, the server, the node, mutual
// TLS, and that the runtime directory is not read with it (as upstream does not).
TEST_F(UpstreamEnvTest, ConfigOverXds) {
  UpstreamTranslation t = Translate({{"CONFIG_TYPE", "GRPC_XDS_SOTW"},
                                     {"RUNTIME_ROOT", "/data"},
                                     {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                                     {"CONFIG_GRPC_XDS_SERVER_URL", "eg.system:18001"},
                                     {"CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"},
                                     {"CONFIG_GRPC_XDS_NODE_METADATA", "zone=a,bad,team=x"},
                                     {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "k:v"},
                                     {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
                                     {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt"},
                                     {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key"},
                                     {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"},
                                     {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "2s"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("CONFIG_GRPC_XDS_NODE_METADATA: 'bad'")));
  EXPECT_EQ(Flag(t, "config_source"), "xds");
  EXPECT_EQ(Flag(t, "xds_server"), "eg.system:18001");
  EXPECT_EQ(Flag(t, "xds_node_id"), "envoy-ratelimit");
  EXPECT_EQ(Flag(t, "xds_node_metadata"), "zone=a,team=x");
  EXPECT_EQ(Flag(t, "xds_headers"), "k:v");
  EXPECT_EQ(Flag(t, "xds_tls"), "true");
  EXPECT_EQ(Flag(t, "xds_tls_cert"), "/certs/tls.crt");
  EXPECT_EQ(Flag(t, "xds_tls_key"), "/certs/tls.key");
  EXPECT_EQ(Flag(t, "xds_tls_ca"), "/certs/ca.crt");
  EXPECT_EQ(Flag(t, "xds_backoff_initial"), "2s");
  EXPECT_EQ(Flag(t, "config"), "unset");

  // Without CONFIG_GRPC_XDS_SERVER_USE_TLS the TLS files are not read, as upstream.
  t = Translate({{"CONFIG_TYPE", "grpc_xds_sotw"}, {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/c"}});
  EXPECT_THAT(Flags(t), ElementsAre("config_source=xds"));
  // With CONFIG_TYPE=FILE the xDS variables are not read.
  t = Translate({{"CONFIG_GRPC_XDS_SERVER_URL", "x:1"}});
  EXPECT_THAT(Flags(t), IsEmpty());
}

// Verifies a single Redis over TCP and over upstream's default unix socket, with credentials.
TEST_F(UpstreamEnvTest, SingleRedis) {
  UpstreamTranslation t = Translate({{"REDIS_SOCKET_TYPE", "tcp"},
                                     {"REDIS_URL", "10.0.0.5:6379"},
                                     {"REDIS_AUTH", "s3cret"},
                                     {"REDIS_POOL_SIZE", "4"}});
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis", "redis_addresses=10.0.0.5:6379",
                                    "redis_password=s3cret", "redis_connections=4"));
  // Upstream's socket type defaults to unix.
  t = Translate({{"REDIS_URL", "/run/redis.sock"}});
  EXPECT_EQ(Flag(t, "redis_addresses"), "unix:/run/redis.sock");
  t = Translate({{"BACKEND_TYPE", "redis"}});
  EXPECT_EQ(Flag(t, "redis_addresses"), "unix:/var/run/nutcracker/ratelimit.sock");
  // An ACL user, and a redis:// URL whose credentials count when REDIS_AUTH is unset.
  t = Translate({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "r:1"}, {"REDIS_AUTH", "rl:pw"}});
  EXPECT_EQ(Flag(t, "redis_username"), "rl");
  EXPECT_EQ(Flag(t, "redis_password"), "pw");
  t = Translate({{"REDIS_URL", "redis://app:pw2@10.0.0.6:6380/2"}});
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis", "redis_db=2",
                                    "redis_addresses=10.0.0.6:6380", "redis_username=app",
                                    "redis_password=pw2"));
}

// Verifies a cluster takes a comma-separated list over TCP whatever the socket type.
TEST_F(UpstreamEnvTest, ClusterRedis) {
  UpstreamTranslation t =
      Translate({{"REDIS_TYPE", "CLUSTER"}, {"REDIS_URL", "10.0.0.1:7000, 10.0.0.2:7000 ,"}});
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis_cluster",
                                    "redis_addresses=10.0.0.1:7000,10.0.0.2:7000"));
  EXPECT_THAT(t.errors, IsEmpty());
}

// Verifies BACKEND_TYPE=memcache: the servers or the SRV name with its refresh, the pool, TLS
// with its files, upstream's empty key prefix (keys are then upstream's own), and the REDIS_*
// variables left alone; the servers and the SRV name are exclusive, as upstream, and one of
// them is needed.
TEST_F(UpstreamEnvTest, Memcache) {
  UpstreamTranslation hosts = TranslateAll({{"BACKEND_TYPE", "memcache"},
                                            {"MEMCACHE_HOST_PORT", "10.0.0.1:11211,10.0.0.2:11211"},
                                            {"MEMCACHE_MAX_IDLE_CONNS", "4"},
                                            {"REDIS_URL", "ignored:6379"}});
  EXPECT_THAT(hosts.errors, IsEmpty());
  EXPECT_EQ(Flag(hosts, "backend"), "memcached");
  EXPECT_EQ(Flag(hosts, "memcached_servers"), "10.0.0.1:11211,10.0.0.2:11211");
  EXPECT_EQ(Flag(hosts, "memcached_connections"), "4");
  EXPECT_EQ(Flag(hosts, "redis_key_prefix"), "");
  EXPECT_EQ(Flag(hosts, "redis_addresses"), "unset");
  UpstreamTranslation srv =
      Translate({{"BACKEND_TYPE", "MEMCACHE"},
                 {"MEMCACHE_SRV", "_memcache._tcp.mc.default.svc.cluster.local"},
                 {"MEMCACHE_SRV_REFRESH", "30s"},
                 {"MEMCACHE_TLS", "true"},
                 {"MEMCACHE_TLS_CACERT", "/ca.pem"},
                 {"MEMCACHE_TLS_CLIENT_CERT", "/c.pem"},
                 {"MEMCACHE_TLS_CLIENT_KEY", "/k.pem"},
                 {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "true"},
                 {"CACHE_KEY_PREFIX", "rl_"}});
  EXPECT_THAT(srv.errors, IsEmpty());
  EXPECT_THAT(Flags(srv),
              ElementsAre("backend=memcached",
                          "memcached_srv=_memcache._tcp.mc.default.svc.cluster.local",
                          "memcached_srv_refresh=30s", "memcached_tls=true",
                          "memcached_tls_ca=/ca.pem", "memcached_tls_cert=/c.pem",
                          "memcached_tls_key=/k.pem",
                          "memcached_tls_skip_hostname_verification=true",
                          "redis_key_prefix=rl_"));
  EXPECT_THAT(Translate({{"BACKEND_TYPE", "memcache"},
                         {"MEMCACHE_HOST_PORT", "a:1"},
                         {"MEMCACHE_SRV", "_m._tcp.x"}})
                  .errors,
              ElementsAre("MEMCACHE_HOST_PORT and MEMCACHE_SRV are both set; give one (as "
                          "upstream)"));
  EXPECT_THAT(Translate({{"BACKEND_TYPE", "memcache"}}).errors,
              ElementsAre(HasSubstr("BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT")));
  EXPECT_THAT(Translate({{"MEMCACHE_HOST_PORT", "a:1"}, {"MEMCACHE_TLS", "true"}}).warnings,
              Contains(HasSubstr("MEMCACHE_HOST_PORT, MEMCACHE_TLS: ignored (BACKEND_TYPE is "
                                 "not memcache)")));
}

// Verifies what cannot be honoured safely is an error naming it.
TEST_F(UpstreamEnvTest, RefusesWhatItCannotHonour) {
  EXPECT_THAT(Translate({{"REDIS_TYPE", "replicated"}, {"REDIS_URL", "a:1"}}).errors,
              ElementsAre("REDIS_TYPE=replicated: not single, cluster or sentinel"));
  // The client certificate's name is checked with a client CA; without one there is no
  // certificate to check, as upstream.
  UpstreamTranslation t = Translate({{"GRPC_SERVER_USE_TLS", "true"},
                 {"GRPC_CLIENT_TLS_CACERT", "/ca.crt"},
                 {"GRPC_CLIENT_TLS_SAN", "envoy"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "tls_client_san"), "envoy");
  t = Translate({{"GRPC_SERVER_USE_TLS", "true"}, {"GRPC_CLIENT_TLS_SAN", "envoy"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("GRPC_CLIENT_TLS_SAN")));
  EXPECT_EQ(Flag(t, "tls_client_san"), "unset");
  EXPECT_THAT(Translate({{"GRPC_SERVER_USE_TLS", "false"}}).errors, IsEmpty());
  EXPECT_THAT(Translate({{"REDIS_URL", "a:1,b:2"}, {"REDIS_SOCKET_TYPE", "tcp"}}).errors,
              ElementsAre(HasSubstr("a single Redis takes one address")));
}

// Verifies upstream's gRPC TLS settings become --tls_cert, --tls_key and --tls_client_ca, and
// only when GRPC_SERVER_USE_TLS is true.
TEST_F(UpstreamEnvTest, GrpcServerTls) {
  UpstreamTranslation t = Translate({{"GRPC_SERVER_USE_TLS", "true"},
                                     {"GRPC_SERVER_TLS_CERT", "/tls/tls.crt"},
                                     {"GRPC_SERVER_TLS_KEY", "/tls/tls.key"},
                                     {"GRPC_CLIENT_TLS_CACERT", "/tls/ca.crt"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "tls_cert"), "/tls/tls.crt");
  EXPECT_EQ(Flag(t, "tls_key"), "/tls/tls.key");
  EXPECT_EQ(Flag(t, "tls_client_ca"), "/tls/ca.crt");
  t = Translate({{"GRPC_SERVER_TLS_CERT", "/tls/tls.crt"}, {"GRPC_SERVER_TLS_KEY", "/k"}});
  EXPECT_EQ(Flag(t, "tls_cert"), "unset");
}

// Verifies the per-second Redis is translated only when REDIS_PERSECOND is true.
TEST_F(UpstreamEnvTest, PerSecondRedis) {
  std::map<std::string, std::string> env = {{"REDIS_SOCKET_TYPE", "tcp"},
                                            {"REDIS_URL", "main:6379"},
                                            {"REDIS_PERSECOND_SOCKET_TYPE", "tcp"},
                                            {"REDIS_PERSECOND_URL", "fast:6379"},
                                            {"REDIS_PERSECOND_AUTH", "u:p"},
                                            {"REDIS_PERSECOND_POOL_SIZE", "3"}};
  EXPECT_EQ(Flag(Translate(env), "redis_per_second_backend"), "unset");
  env["REDIS_PERSECOND"] = "true";
  UpstreamTranslation t = Translate(env);
  EXPECT_EQ(Flag(t, "redis_per_second_backend"), "redis");
  EXPECT_EQ(Flag(t, "redis_per_second_addresses"), "fast:6379");
  EXPECT_EQ(Flag(t, "redis_per_second_username"), "u");
  EXPECT_EQ(Flag(t, "redis_per_second_password"), "p");
  EXPECT_EQ(Flag(t, "redis_per_second_connections"), "3");
  EXPECT_EQ(Flag(t, "redis_addresses"), "main:6379");
  env["REDIS_PERSECOND_TYPE"] = "replicated";
  EXPECT_THAT(Translate(env).errors,
              ElementsAre("REDIS_PERSECOND_TYPE=replicated: not single, cluster or sentinel"));
}

// Verifies REDIS_TLS and REDIS_PERSECOND_TLS, on and off, each set its own Redis's switch, and
// the one set of REDIS_TLS_* files and switch both Redis share is mapped with them.
TEST_F(UpstreamEnvTest, RedisTls) {
  std::map<std::string, std::string> env = {
      {"REDIS_SOCKET_TYPE", "tcp"},
      {"REDIS_URL", "main:6380"},
      {"REDIS_TLS", "true"},
      {"REDIS_TLS_CACERT", "/certs/ca.crt"},
      {"REDIS_TLS_CLIENT_CERT", "/certs/tls.crt"},
      {"REDIS_TLS_CLIENT_KEY", "/certs/tls.key"},
      {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"},
  };
  UpstreamTranslation t = Translate(env);
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis", "redis_addresses=main:6380", "redis_tls=true",
                                    "redis_tls_ca=/certs/ca.crt", "redis_tls_cert=/certs/tls.crt",
                                    "redis_tls_key=/certs/tls.key",
                                    "redis_tls_skip_hostname_verification=true"));
  EXPECT_EQ(t.flags[2].source, "REDIS_TLS");
  EXPECT_EQ(t.flags[3].source, "REDIS_TLS_CACERT");
  EXPECT_EQ(t.flags[4].source, "REDIS_TLS_CLIENT_CERT");
  EXPECT_EQ(t.flags[5].source, "REDIS_TLS_CLIENT_KEY");
  EXPECT_EQ(t.flags[6].source, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION");
  env["REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"] = "false";
  EXPECT_EQ(Flag(Translate(env), "redis_tls_skip_hostname_verification"), "false");
  EXPECT_EQ(Flag(Translate(env), "redis_per_second_tls"), "unset");

  // The per-second Redis: its own switch, on and off, and the same files.
  env["REDIS_PERSECOND"] = "true";
  env["REDIS_PERSECOND_SOCKET_TYPE"] = "tcp";
  env["REDIS_PERSECOND_URL"] = "fast:6380";
  env["REDIS_PERSECOND_TLS"] = "true";
  env["REDIS_TLS"] = "false";
  t = Translate(env);
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "redis_tls"), "false");
  EXPECT_EQ(Flag(t, "redis_per_second_tls"), "true");
  EXPECT_EQ(Flag(t, "redis_tls_ca"), "/certs/ca.crt");
  EXPECT_EQ(Flag(t, "redis_tls_cert"), "/certs/tls.crt");
  EXPECT_EQ(Flag(t, "redis_tls_key"), "/certs/tls.key");
  env["REDIS_PERSECOND_TLS"] = "0";
  env["REDIS_TLS"] = "1";
  t = Translate(env);
  EXPECT_EQ(Flag(t, "redis_tls"), "true");
  EXPECT_EQ(Flag(t, "redis_per_second_tls"), "false");
  EXPECT_EQ(Flag(t, "redis_tls_ca"), "/certs/ca.crt");

  // Unset, neither switch is set and Sluice's default (off) stays.
  t = Translate({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "main:6379"}});
  EXPECT_EQ(Flag(t, "redis_tls"), "unset");
  EXPECT_THAT(Translate({{"REDIS_URL", "a:1"}, {"REDIS_TLS", "yes"}}).errors,
              ElementsAre("REDIS_TLS=yes: not a boolean (true or false)"));
}

// Verifies the shared TLS variables with no Redis on TLS are not mapped (as upstream does not
// read them then) but named in a warning; and that the translation keeps a unix socket with
// TLS for the settings' check to refuse, naming the variables.
TEST_F(UpstreamEnvTest, RedisTlsFilesWithoutTls) {
  UpstreamTranslation t = Translate({{"REDIS_SOCKET_TYPE", "tcp"},
                                     {"REDIS_URL", "main:6379"},
                                     {"REDIS_TLS", "false"},
                                     {"REDIS_PERSECOND_TLS", "true"},  // no REDIS_PERSECOND
                                     {"REDIS_TLS_CACERT", "/certs/ca.crt"},
                                     {"REDIS_TLS_CLIENT_KEY", "/certs/tls.key"},
                                     {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis", "redis_addresses=main:6379",
                                    "redis_tls=false"));
  EXPECT_THAT(t.warnings,
              ElementsAre("REDIS_TLS_CACERT, REDIS_TLS_CLIENT_KEY, "
                          "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: no effect; no Redis has TLS on "
                          "(REDIS_TLS=true, or REDIS_PERSECOND_TLS=true with REDIS_PERSECOND=true)"));
  // Upstream's default "false" is no cause for a warning.
  EXPECT_THAT(Translate({{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false"}}).warnings, IsEmpty());

  t = Translate({{"REDIS_URL", "/run/redis.sock"}, {"REDIS_TLS", "true"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "redis_addresses"), "unix:/run/redis.sock");
  EXPECT_EQ(Flag(t, "redis_tls"), "true");
}

// Verifies a rediss:// URL turns TLS on for its Redis (upstream's client takes redis:// only;
// rediss:// is the standard scheme of Redis over TLS), with its credentials and database as
// redis:// has them; mixed with redis://, or against REDIS_TLS=false, it is an error naming the
// variable and never the password.
TEST_F(UpstreamEnvTest, RedissUrlTurnsTlsOn) {
  UpstreamTranslation t = Translate({{"REDIS_URL", "rediss://app:hunter2@10.0.0.6:6380/2"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis", "redis_db=2",
                                    "redis_addresses=10.0.0.6:6380", "redis_tls=true",
                                    "redis_username=app", "redis_password=hunter2"));
  EXPECT_EQ(t.flags[3].source, "REDIS_URL (rediss://)");
  t = Translate({{"REDIS_URL", "rediss://10.0.0.6:6380"}, {"REDIS_TLS", "true"}});
  EXPECT_EQ(Flag(t, "redis_tls"), "true");
  EXPECT_EQ(t.flags.back().source, "REDIS_TLS, REDIS_URL");

  t = Translate({{"REDIS_TYPE", "cluster"},
                 {"REDIS_URL", "rediss://a:7000,rediss://b:7000"},
                 {"REDIS_TLS_CACERT", "/certs/ca.crt"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "redis_addresses"), "a:7000,b:7000");
  EXPECT_EQ(Flag(t, "redis_tls"), "true");
  EXPECT_EQ(Flag(t, "redis_tls_ca"), "/certs/ca.crt");

  t = Translate({{"REDIS_PERSECOND", "true"},
                 {"REDIS_URL", "redis://main:6379"},
                 {"REDIS_PERSECOND_URL", "rediss://fast:6380"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "redis_tls"), "unset");
  EXPECT_EQ(Flag(t, "redis_per_second_tls"), "true");
  EXPECT_EQ(Flag(t, "redis_per_second_addresses"), "fast:6380");

  EXPECT_THAT(Translate({{"REDIS_TYPE", "cluster"},
                         {"REDIS_URL", "rediss://a:7000,redis://b:7000"}})
                  .errors,
              ElementsAre("REDIS_URL: rediss:// and redis:// in one list; a Redis is reached over "
                          "TLS (rediss://) or not (redis://), all its nodes alike"));
  t = Translate({{"REDIS_URL", "rediss://u:hunter2@a:1"}, {"REDIS_TLS", "false"}});
  EXPECT_THAT(t.errors, ElementsAre("REDIS_URL: rediss:// asks for TLS, but REDIS_TLS=false"));
  t = Translate({{"REDIS_URL", "rediss://u:hunter2@garbage"}});
  EXPECT_THAT(t.errors, ElementsAre("REDIS_URL: rediss:// address 'garbage' is not HOST:PORT"));
  EXPECT_THAT(absl::StrJoin(t.errors, " "), Not(HasSubstr("hunter2")));
}

// Verifies REDIS_TYPE=sentinel (any case): REDIS_URL's first entry is the master's name and the
// rest its sentinels (blanks dropped, over TCP whatever REDIS_SOCKET_TYPE says, as upstream);
// REDIS_SENTINEL_AUTH is the sentinels' password or user:password; REDIS_AUTH stays the
// master's; no address is set.
TEST_F(UpstreamEnvTest, SentinelRedis) {
  std::map<std::string, std::string> env = {
      {"REDIS_TYPE", "Sentinel"},
      {"REDIS_SOCKET_TYPE", "unix"},
      {"REDIS_URL", "mymaster, 10.0.0.1:26379,10.0.0.2:26379 ,"},
      {"REDIS_AUTH", "app:hunter2"},
      {"REDIS_SENTINEL_AUTH", "s3cret"},
      {"REDIS_POOL_SIZE", "4"},
  };
  UpstreamTranslation t = Translate(env);
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis",
                                    "redis_sentinels=10.0.0.1:26379,10.0.0.2:26379",
                                    "redis_sentinel_master=mymaster",
                                    "redis_sentinel_password=s3cret", "redis_username=app",
                                    "redis_password=hunter2", "redis_connections=4"));
  EXPECT_EQ(t.flags[0].source, "REDIS_TYPE");
  EXPECT_EQ(t.flags[1].source, "REDIS_URL");
  EXPECT_EQ(t.flags[2].source, "REDIS_URL");
  EXPECT_EQ(t.flags[3].source, "REDIS_SENTINEL_AUTH");
  EXPECT_EQ(t.flags[4].source, "REDIS_AUTH");

  // user:password, cut at the first ':' as upstream's driver cuts it.
  env["REDIS_SENTINEL_AUTH"] = "watcher:s3:cret";
  t = Translate(env);
  EXPECT_EQ(Flag(t, "redis_sentinel_username"), "watcher");
  EXPECT_EQ(Flag(t, "redis_sentinel_password"), "s3:cret");

  // TLS to the sentinels and the master, with upstream's shared files.
  env["REDIS_TLS"] = "true";
  env["REDIS_TLS_CACERT"] = "/certs/ca.crt";
  t = Translate(env);
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "redis_tls"), "true");
  EXPECT_EQ(Flag(t, "redis_tls_ca"), "/certs/ca.crt");

  // No sentinel credentials: none set.
  t = Translate({{"REDIS_TYPE", "SENTINEL"}, {"REDIS_URL", "mymaster,s1:26379"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis", "redis_sentinels=s1:26379",
                                    "redis_sentinel_master=mymaster"));
}

// Verifies a sentinel written as a URL: redis:// credentials are the sentinels' (as upstream's
// client reads them) unless REDIS_SENTINEL_AUTH gives some; rediss:// turns TLS on, as for a
// single Redis.
TEST_F(UpstreamEnvTest, SentinelUrls) {
  UpstreamTranslation t =
      Translate({{"REDIS_TYPE", "sentinel"},
                 {"REDIS_URL", "mymaster,redis://watcher:s3cret@s1:26379,redis://s2:26379/"},
                 {"REDIS_AUTH", "hunter2"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("backend=redis", "redis_sentinels=s1:26379,s2:26379",
                                    "redis_sentinel_master=mymaster",
                                    "redis_sentinel_username=watcher",
                                    "redis_sentinel_password=s3cret", "redis_password=hunter2"));
  EXPECT_EQ(t.flags[4].source, "REDIS_URL");

  t = Translate({{"REDIS_TYPE", "sentinel"},
                 {"REDIS_URL", "mymaster,redis://watcher:old@s1:26379"},
                 {"REDIS_SENTINEL_AUTH", "new"}});
  EXPECT_EQ(Flag(t, "redis_sentinel_username"), "unset");
  EXPECT_EQ(Flag(t, "redis_sentinel_password"), "new");

  t = Translate({{"REDIS_TYPE", "sentinel"},
                 {"REDIS_URL", "mymaster,rediss://s1:26379,rediss://s2:26379"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_EQ(Flag(t, "redis_sentinels"), "s1:26379,s2:26379");
  EXPECT_EQ(Flag(t, "redis_tls"), "true");
  EXPECT_EQ(t.flags.back().source, "REDIS_URL (rediss://)");
}

// Verifies a sentinel URL that cannot be right stops the start with a message that shows the
// form expected and never a password: no sentinel (upstream panics with "Expected master name
// and a list of urls for the sentinels"), no REDIS_URL, an address where the master's name
// goes, a sentinel that is no HOST:PORT (a socket path among them), credentials without
// redis://, two sets of credentials, a database, and TLS both asked for and refused.
TEST_F(UpstreamEnvTest, SentinelUrlErrors) {
  auto errors = [this](std::string url) {
    return Translate({{"REDIS_TYPE", "sentinel"}, {"REDIS_URL", std::move(url)}}).errors;
  };
  const std::string expected_form =
      "REDIS_URL: with REDIS_TYPE=sentinel, expected the master's name and then the sentinels, "
      "<master name>,<sentinel1>,...,<sentinelN> (at least one sentinel)";
  EXPECT_THAT(errors("mymaster"), ElementsAre(expected_form));
  EXPECT_THAT(errors("mymaster, ,"), ElementsAre(expected_form));
  EXPECT_THAT(errors("redis://u:hunter2@s1:26379"), ElementsAre(expected_form));
  EXPECT_THAT(Translate({{"REDIS_TYPE", "sentinel"}}).errors,
              ElementsAre("REDIS_TYPE=sentinel needs "
                          "REDIS_URL=<master name>,<sentinel1>,...,<sentinelN>"));
  EXPECT_THAT(errors("10.0.0.1:26379,10.0.0.2:26379"),
              ElementsAre("REDIS_URL: with REDIS_TYPE=sentinel, the first entry is the master's "
                          "name as the sentinels know it, not an address: "
                          "<master name>,<sentinel1>,...,<sentinelN>"));
  EXPECT_THAT(errors("mymaster,/var/run/sentinel.sock"),
              ElementsAre("REDIS_URL: sentinel '/var/run/sentinel.sock' is not HOST:PORT (each "
                          "sentinel is HOST:PORT or redis://[USER[:PASSWORD]@]HOST:PORT, reached "
                          "over TCP)"));
  EXPECT_THAT(errors("mymaster,s1:26379,s2"), ElementsAre(HasSubstr("sentinel 's2' is not")));
  EXPECT_THAT(errors("mymaster,u:hunter2@s1:26379"),
              ElementsAre("REDIS_URL: credentials (USER:PASSWORD@) need the redis:// form, "
                          "redis://[USER[:PASSWORD]@]HOST:PORT"));
  EXPECT_THAT(errors("mymaster,redis://a:hunter2@s1:26379,redis://b:hunter3@s2:26379"),
              ElementsAre("REDIS_URL: the sentinels' URLs give different credentials; Sluice "
                          "asks every sentinel with one set (REDIS_SENTINEL_AUTH)"));
  EXPECT_THAT(errors("mymaster,redis://:hunter2@s1:26379/2"),
              ElementsAre("REDIS_URL: a database number means nothing to a sentinel; the "
                          "master's database is --redis_db"));
  EXPECT_THAT(errors("mymaster,rediss://s1:26379,redis://s2:26379"),
              ElementsAre(HasSubstr("rediss:// and redis:// in one list")));
  EXPECT_THAT(Translate({{"REDIS_TYPE", "sentinel"},
                         {"REDIS_URL", "mymaster,rediss://u:hunter2@s1:26379"},
                         {"REDIS_TLS", "false"}})
                  .errors,
              ElementsAre("REDIS_URL: rediss:// asks for TLS, but REDIS_TLS=false"));
  for (const std::string url : {"redis://u:hunter2@s1:26379", "mymaster,u:hunter2@s1:26379",
                                "mymaster,redis://a:hunter2@s1:26379,redis://b:x@s2:26379",
                                "mymaster,redis://:hunter2@s1:26379/2"}) {
    EXPECT_THAT(absl::StrJoin(errors(url), " "), Not(HasSubstr("hunter2"))) << url;
  }
}

// Verifies the per-second twins: REDIS_PERSECOND_TYPE=sentinel, REDIS_PERSECOND_URL and
// REDIS_PERSECOND_SENTINEL_AUTH set the per-second Redis's Sentinel flags, the main Redis keeps
// its own; a SENTINEL_AUTH beside another type has no effect, as upstream, and says so.
TEST_F(UpstreamEnvTest, PerSecondSentinelRedis) {
  std::map<std::string, std::string> env = {
      {"REDIS_SOCKET_TYPE", "tcp"},
      {"REDIS_URL", "main:6379"},
      {"REDIS_PERSECOND", "true"},
      {"REDIS_PERSECOND_TYPE", "sentinel"},
      {"REDIS_PERSECOND_URL", "fastmaster,10.0.1.1:26379,10.0.1.2:26379"},
      {"REDIS_PERSECOND_AUTH", "fast"},
      {"REDIS_PERSECOND_SENTINEL_AUTH", "fastwatcher:f4st"},
  };
  UpstreamTranslation t = Translate(env);
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t),
              ElementsAre("backend=redis", "redis_addresses=main:6379",
                          "redis_per_second_backend=redis",
                          "redis_per_second_sentinels=10.0.1.1:26379,10.0.1.2:26379",
                          "redis_per_second_sentinel_master=fastmaster",
                          "redis_per_second_sentinel_username=fastwatcher",
                          "redis_per_second_sentinel_password=f4st",
                          "redis_per_second_password=fast"));
  EXPECT_EQ(t.flags[2].source, "REDIS_PERSECOND_TYPE");
  EXPECT_EQ(t.flags[3].source, "REDIS_PERSECOND_URL");
  EXPECT_EQ(t.flags[5].source, "REDIS_PERSECOND_SENTINEL_AUTH");
  env["REDIS_PERSECOND_SENTINEL_AUTH"] = "f4st";
  t = Translate(env);
  EXPECT_EQ(Flag(t, "redis_per_second_sentinel_username"), "unset");
  EXPECT_EQ(Flag(t, "redis_per_second_sentinel_password"), "f4st");
  env["REDIS_PERSECOND_URL"] = "fastmaster";
  EXPECT_THAT(Translate(env).errors,
              ElementsAre("REDIS_PERSECOND_URL: with REDIS_PERSECOND_TYPE=sentinel, expected the "
                          "master's name and then the sentinels, "
                          "<master name>,<sentinel1>,...,<sentinelN> (at least one sentinel)"));

  t = Translate({{"REDIS_SOCKET_TYPE", "tcp"},
                 {"REDIS_URL", "main:6379"},
                 {"REDIS_SENTINEL_AUTH", "s3cret"},
                 {"REDIS_PERSECOND", "true"},
                 {"REDIS_PERSECOND_TYPE", "cluster"},
                 {"REDIS_PERSECOND_URL", "a:7000"},
                 {"REDIS_PERSECOND_SENTINEL_AUTH", "f4st"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings,
              ElementsAre("REDIS_SENTINEL_AUTH: no effect; REDIS_TYPE is not sentinel (as "
                          "upstream)",
                          "REDIS_PERSECOND_SENTINEL_AUTH: no effect; REDIS_PERSECOND_TYPE is not "
                          "sentinel (as upstream)"));
  EXPECT_EQ(Flag(t, "redis_sentinel_password"), "unset");
  EXPECT_EQ(Flag(t, "redis_per_second_sentinel_password"), "unset");
}

// Verifies the limiter settings, including STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT's negation
// and LOCAL_CACHE_SIZE_IN_BYTES sized into keys and bytes.
TEST_F(UpstreamEnvTest, LimiterSettings) {
  UpstreamTranslation t = Translate({{"SHADOW_MODE", "1"},
                                     {"QUOTA_MODE", "F"},
                                     {"MERGE_DOMAIN_CONFIG", "true"},
                                     {"FORCE_START_WITHOUT_INITIAL_CONFIG", "True"},
                                     {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "TRUE"},
                                     {"RESPONSE_DYNAMIC_METADATA", "t"},
                                     {"LIMIT_RESPONSE_HEADERS_ENABLED", "true"},
                                     {"LIMIT_RESET_HEADER", "X-Reset"},
                                     {"CACHE_KEY_PREFIX", "rl_"},
                                     {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"},
                                     {"LOCAL_CACHE_SIZE_IN_BYTES", "1048576"},
                                     {"NEAR_LIMIT_RATIO", "0.9"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("shadow_mode=true", "quota_mode=false",
                                    "merge_domain_config=true",
                                    "force_start_without_initial_config=true",
                                    "healthy_with_at_least_one_config_loaded=true",
                                    "response_dynamic_metadata=true", "rate_limit_headers=true",
                                    "rate_limit_reset_header=X-Reset", "redis_key_prefix=rl_",
                                    "default_charge_fixed_window=always", "over_limit_cache_keys=8192",
                                    "over_limit_cache_max_mib=1", "near_limit_ratio=0.9"));
  EXPECT_EQ(Flag(Translate({{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"}}),
                 "default_charge_fixed_window"),
            "if_admitted");
  EXPECT_EQ(Flag(Translate({{"LOCAL_CACHE_SIZE_IN_BYTES", "0"}}), "over_limit_cache_keys"), "0");
  EXPECT_EQ(Flag(Translate({{"LOCAL_CACHE_SIZE_IN_BYTES", "5"}}), "over_limit_cache_keys"), "1");
  EXPECT_EQ(Flag(Translate({{"LOCAL_CACHE_SIZE_IN_BYTES", "5"}}), "over_limit_cache_max_mib"),
            "1");
  EXPECT_EQ(Flag(Translate({{"LOCAL_CACHE_SIZE_IN_BYTES", "104857601"}}),
                 "over_limit_cache_max_mib"),
            "101");
  EXPECT_THAT(Translate({{"NEAR_LIMIT_RATIO", "1.5"}}).errors,
              ElementsAre("NEAR_LIMIT_RATIO=1.5: not a number from 0 to 1"));
  EXPECT_THAT(Translate({{"SHADOW_MODE", "yes"}}).errors,
              ElementsAre("SHADOW_MODE=yes: not a boolean (true or false)"));
}

// Verifies what is accepted but not honoured is named in a warning, one per family.
TEST_F(UpstreamEnvTest, WarnsAboutWhatItIgnores) {
  UpstreamTranslation t = Translate({{"EXPIRATION_JITTER_MAX_SECONDS", "300"},
                                     {"REDIS_URL", "/run/r.sock"},
                                     {"REDIS_PIPELINE_WINDOW", "150us"},
                                     {"REDIS_TIMEOUT", "5s"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, SizeIs(2));
  const std::string all = absl::StrJoin(t.warnings, "\n");
  EXPECT_THAT(all, HasSubstr("REDIS_PIPELINE_WINDOW: no effect"));
  EXPECT_THAT(all, HasSubstr("REDIS_TIMEOUT: not mapped"));
  EXPECT_THAT(Translate({{"USE_STATSD", "false"}}).warnings, IsEmpty());
}

// Verifies Envoy Gateway's tracing environment, exactly as it sets it: TRACING_* onto the
// tracing flags, and the base OTLP endpoint given OTLP/HTTP's traces path.
TEST_F(UpstreamEnvTest, EnvoyGatewayTracing) {
  UpstreamTranslation t = Translate({{"TRACING_ENABLED", "true"},
                                     {"TRACING_SERVICE_NAME", "envoy-ratelimit"},
                                     {"TRACING_SERVICE_NAMESPACE", "envoy-gateway-system"},
                                     {"TRACING_SERVICE_INSTANCE_ID", "pod-name"},
                                     {"TRACING_SAMPLING_RATE", "0.5"},
                                     {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("tracing=true", "tracing_service_name=envoy-ratelimit",
                                    "tracing_service_namespace=envoy-gateway-system",
                                    "tracing_service_instance_id=pod-name",
                                    "tracing_sampling_rate=0.5",
                                    "tracing_endpoint=http://collector:4318/v1/traces"));
  EXPECT_EQ(Flag(t, "tracing_protocol"), "unset");  // http, Sluice's default as upstream's
  EXPECT_EQ(t.flags.back().source, "OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces, OTLP/HTTP)");

  // OTLP/gRPC: the base endpoint as it is.
  t = Translate({{"TRACING_ENABLED", "true"},
                 {"TRACING_EXPORTER_PROTOCOL", "grpc"},
                 {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"}});
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("tracing=true", "tracing_service_name=RateLimit",
                                    "tracing_protocol=grpc",
                                    "tracing_endpoint=http://collector:4317"));
}

// Verifies the TRACING_* variables as upstream reads them: the service name upstream's
// "RateLimit" when unset; a protocol other than http or grpc, or a rate that is no number,
// stops the start; a rate outside 0..1 is taken as upstream's sampler takes it; and without
// TRACING_ENABLED=true the others do nothing but warn.
TEST_F(UpstreamEnvTest, TracingVariables) {
  UpstreamTranslation t = Translate({{"TRACING_ENABLED", "1"}});
  EXPECT_THAT(Flags(t), ElementsAre("tracing=true", "tracing_service_name=RateLimit"));
  EXPECT_EQ(t.flags[1].source, "TRACING_ENABLED (TRACING_SERVICE_NAME unset: RateLimit)");

  t = Translate({{"TRACING_ENABLED", "true"},
                 {"TRACING_EXPORTER_PROTOCOL", "GRPC"},
                 {"TRACING_SAMPLING_RATE", "often"}});
  EXPECT_THAT(t.errors, ElementsAre("TRACING_EXPORTER_PROTOCOL=GRPC: not http or grpc",
                                    "TRACING_SAMPLING_RATE=often: not a number"));
  EXPECT_THAT(Translate({{"TRACING_ENABLED", "true"}, {"TRACING_SAMPLING_RATE", "NaN"}}).errors,
              ElementsAre("TRACING_SAMPLING_RATE=NaN: not a number"));
  EXPECT_THAT(Translate({{"TRACING_ENABLED", "yes"}}).errors,
              ElementsAre("TRACING_ENABLED=yes: not a boolean (true or false)"));

  t = Translate({{"TRACING_ENABLED", "true"}, {"TRACING_SAMPLING_RATE", "1.5"}});
  EXPECT_EQ(Flag(t, "tracing_sampling_rate"), "1");
  EXPECT_THAT(t.warnings,
              ElementsAre("TRACING_SAMPLING_RATE=1.5: taken as 1, as upstream's sampler takes it"));
  EXPECT_EQ(Flag(Translate({{"TRACING_ENABLED", "true"}, {"TRACING_SAMPLING_RATE", "-1"}}),
                 "tracing_sampling_rate"),
            "0");

  t = Translate({{"TRACING_ENABLED", "false"},
                 {"TRACING_SERVICE_NAME", "rl"},
                 {"TRACING_EXPORTER_PROTOCOL", "udp"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("tracing=false"));
  EXPECT_THAT(t.warnings, ElementsAre("TRACING_SERVICE_NAME, TRACING_EXPORTER_PROTOCOL: no "
                                      "effect without TRACING_ENABLED=true"));
}

// Verifies the standard OTLP exporter variables: the signal-specific endpoint wins and is used
// as it is; the base one is joined to /v1/traces without a double slash; headers are
// percent-decoded; timeouts are milliseconds, the exporter's winning over the batch
// processor's.
TEST_F(UpstreamEnvTest, OtlpExporterVariables) {
  UpstreamTranslation t =
      Translate({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"},
                 {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://otlp.example.com/api/traces"},
                 {"OTEL_EXPORTER_OTLP_HEADERS", "x-team=ops"},
                 {"OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                  "api-key=abc%3D%3D, x-scope = a%20b%2Fc ,x-plus=1+1"},
                 {"OTEL_EXPORTER_OTLP_TIMEOUT", "500"},
                 {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500"},
                 {"OTEL_BSP_EXPORT_TIMEOUT", "9000"},
                 {"OTEL_EXPORTER_OTLP_INSECURE", "TRUE"},
                 {"OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/otel/ca.pem"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t),
              ElementsAre("tracing_endpoint=https://otlp.example.com/api/traces",
                          "tracing_headers=api-key=abc==,x-scope=a b/c,x-plus=1+1",
                          "tracing_insecure=true", "tracing_ca=/etc/otel/ca.pem",
                          "tracing_timeout=2500ms"));
  EXPECT_EQ(t.flags[1].source, "OTEL_EXPORTER_OTLP_TRACES_HEADERS");
  EXPECT_EQ(t.flags[4].source, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT");

  EXPECT_EQ(Flag(Translate({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"}}),
                 "tracing_endpoint"),
            "http://collector:4318/v1/traces");
  EXPECT_EQ(Flag(Translate({{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://gw.example.com/otlp"}}),
                 "tracing_endpoint"),
            "https://gw.example.com/otlp/v1/traces");
  EXPECT_EQ(Flag(Translate({{"OTEL_EXPORTER_OTLP_TIMEOUT", "500"},
                            {"OTEL_BSP_EXPORT_TIMEOUT", "9000"}}),
                 "tracing_timeout"),
            "500ms");
  EXPECT_EQ(Flag(Translate({{"OTEL_BSP_EXPORT_TIMEOUT", "9000"}}), "tracing_timeout"), "9000ms");
}

// Verifies the batch processor's variables, the batch cut to the queue as the SDKs cut it.
TEST_F(UpstreamEnvTest, OtelBatchProcessorVariables) {
  UpstreamTranslation t = Translate({{"OTEL_BSP_SCHEDULE_DELAY", "1000"},
                                     {"OTEL_BSP_MAX_QUEUE_SIZE", "4096"},
                                     {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1024"}});
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("tracing_export_interval=1000ms",
                                    "tracing_max_queue_spans=4096",
                                    "tracing_max_export_spans=1024"));
  // A queue below the default batch (512) cuts the batch too.
  EXPECT_THAT(Flags(Translate({{"OTEL_BSP_MAX_QUEUE_SIZE", "100"}})),
              ElementsAre("tracing_max_queue_spans=100", "tracing_max_export_spans=100"));
  EXPECT_THAT(Flags(Translate({{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "5000"}})),
              ElementsAre("tracing_max_export_spans=2048"));
}

// Verifies what the OTEL_* variables hold that cannot be honoured is a warning, never an error
// (the OpenTelemetry spec has bad values ignored), and never repeats a header's value.
TEST_F(UpstreamEnvTest, OtelVariablesThatAreNotHonouredWarn) {
  UpstreamTranslation t =
      Translate({{"OTEL_EXPORTER_OTLP_HEADERS",
                  "api-key=s3cret%zz,justasecret,=x,x-list=a%2Cb,x-ok=1,x-crlf=a%0D%0Ab"},
                 {"OTEL_EXPORTER_OTLP_TIMEOUT", "soon"},
                 {"OTEL_BSP_MAX_QUEUE_SIZE", "0"},
                 {"OTEL_EXPORTER_OTLP_INSECURE", "yes"},
                 {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
                 {"OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem"},
                 {"OTEL_TRACES_SAMPLER", "always_off"},
                 {"OTEL_SERVICE_NAME", "svc"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("tracing_headers=x-ok=1"));
  EXPECT_THAT(
      t.warnings,
      ElementsAre(
          "OTEL_EXPORTER_OTLP_HEADERS: header 'api-key' is not percent-encoded (%XX); ignored",
          "OTEL_EXPORTER_OTLP_HEADERS: an item is not name=value; ignored",
          HasSubstr("OTEL_EXPORTER_OTLP_HEADERS: header '': an empty name"),
          HasSubstr("OTEL_EXPORTER_OTLP_HEADERS: header 'x-list': "),
          HasSubstr("OTEL_EXPORTER_OTLP_HEADERS: header 'x-crlf': "),
          "OTEL_EXPORTER_OTLP_INSECURE=yes: not true or false; ignored",
          "OTEL_EXPORTER_OTLP_TIMEOUT=soon: not a whole number of milliseconds from 1 to "
          "2147483647; ignored",
          "OTEL_BSP_MAX_QUEUE_SIZE=0: not a whole number of spans from 1 to 2147483647; ignored",
          "OTEL_EXPORTER_OTLP_COMPRESSION=gzip: not supported; spans are sent uncompressed",
          "OTEL_EXPORTER_OTLP_CLIENT_KEY: no effect; Sluice's exporter presents no client "
          "certificate",
          HasSubstr("OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME: no effect")));
  EXPECT_THAT(absl::StrJoin(t.warnings, "\n"), Not(HasSubstr("s3cret")));
  EXPECT_THAT(absl::StrJoin(t.warnings, "\n"), Not(HasSubstr("justasecret")));
}

// Verifies OTEL_EXPORTER_OTLP_PROTOCOL does not choose the protocol (upstream's
// TRACING_EXPORTER_PROTOCOL does) and is named in a warning when it disagrees or asks for
// http/json.
TEST_F(UpstreamEnvTest, OtelProtocolOnlyWarns) {
  UpstreamTranslation t = Translate({{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
                                     {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"}});
  EXPECT_EQ(Flag(t, "tracing_protocol"), "unset");
  EXPECT_EQ(Flag(t, "tracing_endpoint"), "http://c:4317/v1/traces");
  EXPECT_THAT(t.warnings,
              ElementsAre("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: not followed; as upstream, the "
                          "protocol is chosen by TRACING_EXPORTER_PROTOCOL (unset: http) or "
                          "--tracing_protocol"));
  t = Translate({{"TRACING_ENABLED", "true"},
                 {"TRACING_EXPORTER_PROTOCOL", "grpc"},
                 {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"},
                 {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}});
  EXPECT_THAT(t.warnings,
              ElementsAre("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json: not followed (http/json "
                          "is not supported); as upstream, the protocol is chosen by "
                          "TRACING_EXPORTER_PROTOCOL=grpc or --tracing_protocol"));
  EXPECT_THAT(Translate({{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}}).warnings, IsEmpty());
  EXPECT_THAT(Translate({{"TRACING_ENABLED", "true"},
                         {"TRACING_EXPORTER_PROTOCOL", "grpc"},
                         {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}})
                  .warnings,
              IsEmpty());
}

// Verifies the OTEL_* variables alone are not upstream's environment: they bring no upstream
// charging, while TRACING_ENABLED does.
TEST_F(UpstreamEnvTest, OtelVariablesAloneAreNotUpstream) {
  UpstreamTranslation t = TranslateAll({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                                        {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"}});
  EXPECT_EQ(Flag(t, "tracing_endpoint"), "http://c:4318/v1/traces");
  EXPECT_EQ(Flag(t, "default_charge_fixed_window"), "unset");
  EXPECT_FALSE(t.upstream_environment);
  EXPECT_EQ(Flag(TranslateAll({{"TRACING_ENABLED", "true"}}), "default_charge_fixed_window"), "always");
}

// Verifies USE_PROMETHEUS turns on upstream's Prometheus surface at PROMETHEUS_ADDR (upstream's
// ":9090" by default, every interface) with its path, mapping file and millisecond switch; the
// PROMETHEUS_* variables alone do nothing but warn.
TEST_F(UpstreamEnvTest, UsePrometheus) {
  UpstreamTranslation t = Translate({{"USE_PROMETHEUS", "true"}});
  EXPECT_THAT(Flags(t), ElementsAre("prometheus_address=0.0.0.0:9090"));
  EXPECT_EQ(t.flags[0].source, "USE_PROMETHEUS (PROMETHEUS_ADDR unset: :9090)");
  EXPECT_THAT(t.warnings, IsEmpty());

  t = Translate({{"USE_PROMETHEUS", "true"},
                 {"PROMETHEUS_ADDR", ":19001"},
                 {"PROMETHEUS_PATH", "/stats"},
                 {"PROMETHEUS_MAPPER_YAML", "/etc/statsd-exporter/conf.yaml"},
                 {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"}});
  EXPECT_THAT(Flags(t), ElementsAre("prometheus_address=0.0.0.0:19001", "prometheus_path=/stats",
                                    "prometheus_mapper=/etc/statsd-exporter/conf.yaml",
                                    "prometheus_response_time_ms=true"));
  EXPECT_EQ(t.flags[0].source, "USE_PROMETHEUS, PROMETHEUS_ADDR");
  EXPECT_THAT(Flag(Translate({{"USE_PROMETHEUS", "1"}, {"PROMETHEUS_ADDR", "127.0.0.1:9"}}),
                   "prometheus_address"),
              "127.0.0.1:9");

  t = Translate({{"USE_PROMETHEUS", "false"}, {"PROMETHEUS_ADDR", ":19001"}});
  EXPECT_THAT(t.flags, IsEmpty());
  EXPECT_THAT(t.warnings, ElementsAre("PROMETHEUS_ADDR: no effect without USE_PROMETHEUS=true"));
  EXPECT_THAT(Translate({{"USE_PROMETHEUS", "maybe"}}).errors,
              ElementsAre("USE_PROMETHEUS=maybe: not a boolean (true or false)"));
}

// Verifies upstream's statsd sink is on wherever upstream's is: under any of upstream's
// variables USE_STATSD defaults to true, to localhost:8125 over TCP (gostats' net sink), with
// STATSD_HOST, STATSD_PORT, STATSD_PROTOCOL, STATS_FLUSH_INTERVAL and EXTRA_TAGS; without any
// of upstream's variables (a native run, or the Datadog and OTEL_* ones alone) it stays off.
TEST_F(UpstreamEnvTest, StatsdOnByDefaultAsUpstream) {
  UpstreamTranslation t = TranslateAll({{"REDIS_URL", "r:6379"}});
  EXPECT_EQ(Flag(t, "statsd_address"), "localhost:8125");
  EXPECT_EQ(Flag(t, "statsd_protocol"), "tcp");
  EXPECT_EQ(Flag(t, "statsd_dogstatsd"), "unset");
  EXPECT_THAT(t.warnings, IsEmpty());
  for (const FlagAssignment& a : t.flags) {
    if (a.flag == "statsd_address") {
      EXPECT_EQ(a.source, "envoyproxy/ratelimit's default (USE_STATSD unset: true), STATSD_HOST, "
                          "STATSD_PORT unset: localhost:8125");
    }
  }
  EXPECT_EQ(Flag(TranslateAll({}), "statsd_address"), "unset");
  EXPECT_EQ(Flag(TranslateAll({{"DD_ENV", "prod"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"}}),
                 "statsd_address"),
            "unset");

  t = Translate({{"USE_STATSD", "true"},
                 {"STATSD_HOST", "statsd.monitoring"},
                 {"STATSD_PORT", "9125"},
                 {"STATSD_PROTOCOL", "udp"},
                 {"STATS_FLUSH_INTERVAL", "1m30s"},
                 {"EXTRA_TAGS", "cluster:eu-1,version:1.2"}});
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_THAT(Flags(t), ElementsAre("statsd_address=statsd.monitoring:9125", "statsd_protocol=udp",
                                    "statsd_flush_interval=1m30s",
                                    "statsd_extra_tags=cluster:eu-1,version:1.2"));
  EXPECT_EQ(t.flags[0].source, "USE_STATSD, STATSD_HOST, STATSD_PORT");
  EXPECT_EQ(Flag(TranslateAll({{"STATSD_HOST", "::1"}}), "statsd_address"), "[::1]:8125");
  EXPECT_EQ(Flag(TranslateAll({{"STATSD_PROTOCOL", "tcp6"}}), "statsd_protocol"), "tcp");

  // USE_STATSD=false: nothing sent; what only a sink reads is named.
  t = TranslateAll({{"USE_STATSD", "false"}, {"STATSD_HOST", "statsd"}, {"EXTRA_TAGS", "a:b"}});
  EXPECT_EQ(Flag(t, "statsd_address"), "unset");
  EXPECT_THAT(t.warnings, ElementsAre("STATSD_HOST, EXTRA_TAGS: no effect without a statsd sink "
                                      "(USE_STATSD=false)"));
}

// Verifies how the sinks combine as upstream's runner.go picks them: DISABLE_STATS turns off
// statsd and Prometheus alike; USE_PROMETHEUS=true alone (upstream refuses it beside
// USE_STATSD's default) serves Prometheus only; both asked for explicitly are both served
// (with a warning); USE_DOG_STATSD=true beside USE_STATSD=true is refused, as upstream.
TEST_F(UpstreamEnvTest, StatsSinksCombineAsUpstream) {
  UpstreamTranslation t = TranslateAll({{"DISABLE_STATS", "true"},
                                        {"USE_PROMETHEUS", "true"},
                                        {"STATSD_HOST", "statsd"}});
  EXPECT_EQ(Flag(t, "statsd_address"), "unset");
  EXPECT_EQ(Flag(t, "prometheus_address"), "unset");
  EXPECT_THAT(t.warnings,
              ElementsAre("USE_PROMETHEUS=true: no effect with DISABLE_STATS=true, as upstream "
                          "(nothing served on PROMETHEUS_ADDR)",
                          "STATSD_HOST: no effect with DISABLE_STATS=true, as upstream"));

  t = TranslateAll({{"USE_PROMETHEUS", "true"}});
  EXPECT_EQ(Flag(t, "prometheus_address"), "0.0.0.0:9090");
  EXPECT_EQ(Flag(t, "statsd_address"), "unset");
  EXPECT_THAT(t.warnings, IsEmpty());

  t = TranslateAll({{"USE_PROMETHEUS", "true"}, {"USE_STATSD", "false"}});  // Envoy Gateway
  EXPECT_EQ(Flag(t, "prometheus_address"), "0.0.0.0:9090");
  EXPECT_EQ(Flag(t, "statsd_address"), "unset");
  EXPECT_THAT(t.warnings, IsEmpty());

  t = TranslateAll({{"USE_PROMETHEUS", "true"}, {"USE_STATSD", "true"}});
  EXPECT_EQ(Flag(t, "prometheus_address"), "0.0.0.0:9090");
  EXPECT_EQ(Flag(t, "statsd_address"), "localhost:8125");
  EXPECT_THAT(t.warnings, ElementsAre("USE_STATSD=true with USE_PROMETHEUS=true: upstream refuses "
                                      "two stats sinks; Sluice serves both"));

  t = TranslateAll({{"USE_DOG_STATSD", "true"}, {"USE_STATSD", "true"}});
  EXPECT_EQ(Flag(t, "statsd_address"), "unset");
  ASSERT_THAT(t.errors, SizeIs(1));
  EXPECT_THAT(t.errors[0], HasSubstr("USE_DOG_STATSD=true with USE_STATSD=true: two statsd sinks"));

  EXPECT_THAT(TranslateAll({{"USE_STATSD", "maybe"}}).errors,
              ElementsAre("USE_STATSD=maybe: not a boolean (true or false)"));
}

// Verifies the values upstream would refuse at start (its settings panic) stop Sluice's too,
// naming the variable, and an EXTRA_TAGS item with an empty key or value is dropped as gostats
// drops it.
TEST_F(UpstreamEnvTest, StatsValuesUpstreamRefuses) {
  EXPECT_THAT(TranslateAll({{"EXTRA_TAGS", "a:b,c"}}).errors,
              ElementsAre("EXTRA_TAGS=a:b,c: invalid map item: \"c\" (key:value,key2:value2)"));
  EXPECT_THAT(TranslateAll({{"EXTRA_TAGS", "a:b:c"}}).errors,
              ElementsAre("EXTRA_TAGS=a:b:c: invalid map item: \"a:b:c\" (key:value,key2:value2)"));
  UpstreamTranslation t = TranslateAll({{"EXTRA_TAGS", "a:,b:1,:c"}});
  EXPECT_EQ(Flag(t, "statsd_extra_tags"), "b:1");
  EXPECT_THAT(t.warnings, SizeIs(2));
  EXPECT_THAT(TranslateAll({{"STATS_FLUSH_INTERVAL", "10"}}).errors,
              ElementsAre("STATS_FLUSH_INTERVAL=10: not a positive duration (\"10s\", \"1m\", "
                          "\"500ms\")"));
  EXPECT_THAT(TranslateAll({{"STATS_FLUSH_INTERVAL", "0s"}}).errors, SizeIs(1));
  EXPECT_EQ(Flag(TranslateAll({{"STATS_FLUSH_INTERVAL", "500ms"}}), "statsd_flush_interval"),
            "500ms");
  EXPECT_THAT(TranslateAll({{"STATSD_PORT", "99999"}}).errors,
              ElementsAre("STATSD_PORT=99999: not a whole number from 1 to 65535"));
  EXPECT_THAT(TranslateAll({{"STATSD_PROTOCOL", "quic"}}).errors,
              ElementsAre("STATSD_PROTOCOL=quic: not tcp or udp"));
}

// Verifies USE_DOG_STATSD: DogStatsD over UDP to STATSD_HOST:STATSD_PORT, the DD_* tags
// datadog-go adds (in its order), and the mogrifiers USE_DOG_STATSD_MOGRIFIERS names, read as
// upstream's envconfig reads them (names upper-cased; PATTERN, NAME, TAGS as fallbacks).
TEST_F(UpstreamEnvTest, DogStatsdWithMogrifiers) {
  UpstreamTranslation t = TranslateAll({
      {"USE_DOG_STATSD", "true"},
      {"USE_STATSD", "false"},
      {"STATSD_HOST", "10.0.0.7"},
      {"DD_ENV", "prod"},
      {"DD_ENTITY_ID", "pod-uid"},
      {"EXTRA_TAGS", "version:1.2"},
      {"USE_DOG_STATSD_MOGRIFIERS", "hits,DOMAIN"},
      {"DOG_STATSD_MOGRIFIER_HITS_PATTERN",
       R"(^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$)"},
      {"DOG_STATSD_MOGRIFIER_HITS_NAME", "ratelimit.service.rate_limit.$3"},
      {"DOG_STATSD_MOGRIFIER_HITS_TAGS", "domain:$1,descriptor:$2"},
      {"DOG_STATSD_MOGRIFIER_DOMAIN_PATTERN", R"(^some\.original\.metric\.(.*)$)"},
      {"DOG_STATSD_MOGRIFIER_DOMAIN_NAME", "some.original.metric"},
      {"TAGS", "domain:$1"},  // envconfig's fallback for the unset _TAGS
  });
  EXPECT_THAT(t.errors, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_EQ(Flag(t, "statsd_address"), "10.0.0.7:8125");
  EXPECT_EQ(Flag(t, "statsd_protocol"), "udp");
  EXPECT_EQ(Flag(t, "statsd_dogstatsd"), "true");
  EXPECT_EQ(Flag(t, "statsd_extra_tags"), "version:1.2");
  EXPECT_EQ(Flag(t, "statsd_dogstatsd_tags"), "dd.internal.entity_id:pod-uid,env:prod");
  EXPECT_EQ(Flag(t, "statsd_mogrifiers"),
            R"([{"id": "hits", "pattern": "^ratelimit\\.service\\.rate_limit\\.([^.]+)\\.(.*)\\.([^.]+)$", )"
            R"("name": "ratelimit.service.rate_limit.$3", "tags": "domain:$1,descriptor:$2"}, )"
            R"({"id": "DOMAIN", "pattern": "^some\\.original\\.metric\\.(.*)$", )"
            R"("name": "some.original.metric", "tags": "domain:$1"}])");
  // USE_STATSD unset beside it: upstream refuses; Sluice takes it as false.
  EXPECT_EQ(Flag(TranslateAll({{"USE_DOG_STATSD", "true"}}), "statsd_dogstatsd"), "true");
  // Mogrifiers without DogStatsD do nothing, as upstream.
  t = TranslateAll({{"USE_DOG_STATSD_MOGRIFIERS", "X"}});
  EXPECT_EQ(Flag(t, "statsd_mogrifiers"), "unset");
  EXPECT_THAT(t.warnings,
              ElementsAre("USE_DOG_STATSD_MOGRIFIERS: no effect without USE_DOG_STATSD=true, as "
                          "upstream"));
}

// Verifies a mogrifier upstream refuses at start (newMogrifierMapFromEnv) stops the start,
// naming the variable.
TEST_F(UpstreamEnvTest, DogStatsdMogrifierErrors) {
  auto errors = [this](std::map<std::string, std::string> env) {
    env["USE_DOG_STATSD"] = "true";
    env["USE_DOG_STATSD_MOGRIFIERS"] = "M";
    return TranslateAll(std::move(env)).errors;
  };
  EXPECT_THAT(errors({{"DOG_STATSD_MOGRIFIER_M_NAME", "n"}}),
              ElementsAre("DOG_STATSD_MOGRIFIER_M_PATTERN: no PATTERN specified for mogrifier M"));
  EXPECT_THAT(errors({{"DOG_STATSD_MOGRIFIER_M_PATTERN", "x"}}),
              ElementsAre("DOG_STATSD_MOGRIFIER_M_NAME: no NAME specified for mogrifier M"));
  EXPECT_THAT(errors({{"DOG_STATSD_MOGRIFIER_M_PATTERN", "a(b"},
                      {"DOG_STATSD_MOGRIFIER_M_NAME", "n"}}),
              ElementsAre(HasSubstr("DOG_STATSD_MOGRIFIER_M_PATTERN=a(b: failed to compile "
                                    "pattern for mogrifier M: missing )")));
  EXPECT_THAT(errors({{"DOG_STATSD_MOGRIFIER_M_PATTERN", "x"},
                      {"DOG_STATSD_MOGRIFIER_M_NAME", "n"},
                      {"DOG_STATSD_MOGRIFIER_M_TAGS", ":5"}}),
              ElementsAre("DOG_STATSD_MOGRIFIER_M_TAGS=:5: no key specified for a tag of "
                          "mogrifier M"));
  EXPECT_THAT(errors({{"DOG_STATSD_MOGRIFIER_M_PATTERN", "x"},
                      {"DOG_STATSD_MOGRIFIER_M_NAME", "n"},
                      {"DOG_STATSD_MOGRIFIER_M_TAGS", "domain:$1,descriptor:"}}),
              ElementsAre("DOG_STATSD_MOGRIFIER_M_TAGS=domain:$1,descriptor:: no value specified "
                          "for tag descriptor for mogrifier M"));
  EXPECT_THAT(errors({{"DOG_STATSD_MOGRIFIER_M_PATTERN", "x"},
                      {"DOG_STATSD_MOGRIFIER_M_NAME", "n"},
                      {"DOG_STATSD_MOGRIFIER_M_TAGS", "a"}}),
              ElementsAre("DOG_STATSD_MOGRIFIER_M_TAGS=a: failed to load mogrifier M: invalid "
                          "map item: \"a\""));
}

// Verifies a setting's source names only the variables that were set and chose it, saying
// when upstream's default filled in the rest.
TEST_F(UpstreamEnvTest, SourceNamesOnlyVariablesThatWereSet) {
  UpstreamTranslation t = Translate({{"REDIS_URL", "r:6379"}, {"REDIS_SOCKET_TYPE", "tcp"}});
  ASSERT_THAT(Flags(t), ElementsAre("backend=redis", "redis_addresses=r:6379"));
  EXPECT_EQ(t.flags[0].source, "REDIS_URL (REDIS_TYPE unset: single)");
  EXPECT_EQ(t.flags[1].source, "REDIS_URL, REDIS_SOCKET_TYPE");

  t = Translate({{"BACKEND_TYPE", "redis"}});
  ASSERT_THAT(t.flags, SizeIs(2));
  EXPECT_EQ(t.flags[0].source, "BACKEND_TYPE (REDIS_TYPE unset: single)");
  EXPECT_EQ(t.flags[1].source, "upstream's default REDIS_URL");

  t = Translate({{"REDIS_TYPE", "cluster"}, {"REDIS_URL", "a:1"}});
  EXPECT_EQ(t.flags[0].source, "REDIS_TYPE");
  EXPECT_EQ(t.flags[1].source, "REDIS_URL");

  t = Translate({{"REDIS_URL", "/run/r.sock"}, {"REDIS_PERSECOND", "true"}});
  EXPECT_EQ(Flag(t, "redis_per_second_addresses"),
            "unix:/var/run/nutcracker/ratelimitpersecond.sock");
  ASSERT_THAT(t.flags, SizeIs(4));  // backend and addresses of each Redis
  EXPECT_EQ(t.flags[2].source, "REDIS_PERSECOND (REDIS_PERSECOND_TYPE unset: single)");
  EXPECT_EQ(t.flags[3].source, "upstream's default REDIS_PERSECOND_URL");

  t = Translate({{"GRPC_HOST", "127.0.0.1"}});
  EXPECT_THAT(Flags(t), ElementsAre("grpc_address=127.0.0.1:8081"));
  EXPECT_EQ(t.flags[0].source, "GRPC_HOST");
}

// Verifies a Redis address that is not HOST:PORT is an error naming the variable, never
// repeating a password.
TEST_F(UpstreamEnvTest, RefusesMalformedRedisUrlNamingIt) {
  EXPECT_THAT(
      Translate({{"REDIS_URL", "garbage"}, {"REDIS_SOCKET_TYPE", "tcp"}}).errors,
      ElementsAre("REDIS_URL: 'garbage' is not HOST:PORT (REDIS_URL takes HOST:PORT or "
                  "redis://[USER[:PASSWORD]@]HOST:PORT[/DB])"));
  EXPECT_THAT(Translate({{"REDIS_URL", "redis://u:hunter2@garbage/1"}}).errors,
              ElementsAre("REDIS_URL: redis:// address 'garbage' is not HOST:PORT"));
  EXPECT_THAT(Translate({{"REDIS_URL", "h:99999"}, {"REDIS_SOCKET_TYPE", "tcp"}}).errors,
              ElementsAre(HasSubstr("REDIS_URL: 'h:99999': port '99999' is not a number from 1 "
                                    "to 65535")));
  UpstreamTranslation t = Translate({{"REDIS_URL", "u:hunter2@h:1"}, {"REDIS_SOCKET_TYPE", "tcp"}});
  EXPECT_THAT(t.errors, ElementsAre(HasSubstr("REDIS_URL: credentials (USER:PASSWORD@) need "
                                              "the redis:// form")));
  EXPECT_THAT(absl::StrJoin(t.errors, " "), Not(HasSubstr("hunter2")));
  EXPECT_THAT(Translate({{"REDIS_TYPE", "cluster"}, {"REDIS_URL", "a:1,b"}}).errors,
              ElementsAre(HasSubstr("REDIS_URL: 'b' is not HOST:PORT")));
  EXPECT_THAT(
      Translate({{"REDIS_PERSECOND", "true"}, {"REDIS_PERSECOND_URL", "x"},
                 {"REDIS_PERSECOND_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "/run/r.sock"}})
          .errors,
      ElementsAre(HasSubstr("REDIS_PERSECOND_URL: 'x' is not HOST:PORT")));
}

// Verifies the log line credits a variable only with what is in force: a flag that a later
// setting changed, or set again, names that setting and the value in force; passwords hidden.
TEST_F(UpstreamEnvTest, AssignmentNoteSaysWhichSettingWon) {
  const FlagAssignment port{"http_address", "0.0.0.0:9000", "PORT"};
  EXPECT_EQ(UpstreamAssignmentNote(port, "0.0.0.0:9000", "0.0.0.0:9000", ""),
            "--http_address=0.0.0.0:9000 from PORT");
  EXPECT_EQ(UpstreamAssignmentNote(port, "0.0.0.0:9000", "127.0.0.1:1", "the command line"),
            "PORT: --http_address=0.0.0.0:9000 overridden by the command line "
            "(--http_address=127.0.0.1:1 in force)");
  // Set again to the same value: still not the variable's doing.
  EXPECT_EQ(UpstreamAssignmentNote(port, "0.0.0.0:9000", "0.0.0.0:9000", "SLUICE_HTTP_ADDRESS"),
            "PORT: --http_address=0.0.0.0:9000 overridden by SLUICE_HTTP_ADDRESS "
            "(--http_address=0.0.0.0:9000 in force)");
  EXPECT_EQ(UpstreamAssignmentNote(port, "0.0.0.0:9000", "1.2.3.4:5", ""),
            "PORT: --http_address=0.0.0.0:9000 overridden by a later setting "
            "(--http_address=1.2.3.4:5 in force)");
  const FlagAssignment auth{"redis_password", "hunter2", "REDIS_AUTH"};
  EXPECT_EQ(UpstreamAssignmentNote(auth, "hunter2", "other", "the command line"),
            "REDIS_AUTH: --redis_password=(hidden) overridden by the command line "
            "(--redis_password=(hidden) in force)");
  const FlagAssignment headers{"tracing_headers", "api-key=s3cret", "OTEL_EXPORTER_OTLP_HEADERS"};
  EXPECT_EQ(UpstreamAssignmentNote(headers, "api-key=s3cret", "api-key=s3cret", ""),
            "--tracing_headers=(hidden) from OTEL_EXPORTER_OTLP_HEADERS");
  const FlagAssignment xds{"xds_headers", "authorization:Bearer t0ken",
                           "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"};
  EXPECT_EQ(UpstreamAssignmentNote(xds, "authorization:Bearer t0ken",
                                   "authorization:Bearer t0ken", ""),
            "--xds_headers=(hidden) from CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS");
}

// Verifies the command line is read as absl::ParseCommandLine reads flags.
TEST_F(UpstreamEnvTest, CommandLineNamesFlag) {
  EXPECT_TRUE(CommandLineNamesFlag({"--http_address=127.0.0.1:1"}, "http_address"));
  EXPECT_TRUE(CommandLineNamesFlag({"-http_address", "127.0.0.1:1"}, "http_address"));
  EXPECT_TRUE(CommandLineNamesFlag({"--noshadow_mode"}, "shadow_mode"));
  EXPECT_TRUE(CommandLineNamesFlag({"--shadow_mode"}, "shadow_mode"));
  EXPECT_FALSE(CommandLineNamesFlag({"--http_address_x=1"}, "http_address"));
  EXPECT_FALSE(CommandLineNamesFlag({"http_address=1"}, "http_address"));
  EXPECT_FALSE(CommandLineNamesFlag({"--", "--http_address=1"}, "http_address"));
  EXPECT_FALSE(CommandLineNamesFlag({}, "http_address"));
}

}  // namespace
}  // namespace sluice
