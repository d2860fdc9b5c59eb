#include "server/settings/flag_layers.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/settings/setting_flags.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Every set of upstream variables brings upstream's charging (upstream_env_test checks it).
constexpr char kUpstreamChargeNote[] =
    "--default_charge_fixed_window=always from envoyproxy/ratelimit's default "
    "(STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT unset)";

class FlagLayersTest : public ::testing::Test {
 protected:
  // The notes, without those of the other defaults upstream's variables bring (its statsd
  // sink, ...: upstream_env_test checks each), its charging kept.
  static std::vector<std::string> Notes(const LayeredFlags& layered) {
    std::vector<std::string> notes;
    for (const std::string& note : layered.notes) {
      if (note == kUpstreamChargeNote ||
          !absl::StrContains(note, " from envoyproxy/ratelimit's default")) {
        notes.push_back(note);
      }
    }
    return notes;
  }

  // Layers the fake environment `env_` and `command_line`.
  LayeredFlags Layer(const std::map<std::string, std::string>& command_line = {}) {
    return LayerFlags(
        [this](absl::string_view name) -> std::optional<std::string> {
          auto it = env_.find(std::string(name));
          if (it == env_.end()) {
            return std::nullopt;
          }
          return it->second;
        },
        command_line);
  }

  std::map<std::string, std::string> env_;
};

// Verifies the precedence: upstream's variable < SLUICE_<FLAG> < the command line, each value
// in force saying where it came from.
TEST_F(FlagLayersTest, CommandLineBeatsOwnVariablesBeatUpstreamVariables) {
  env_ = {{"PORT", "9000"},
          {"GRPC_PORT", "9001"},
          {"DEBUG_PORT", "9002"},
          {"SLUICE_GRPC_ADDRESS", "127.0.0.1:7001"},
          {"SLUICE_DEBUG_ADDRESS", "127.0.0.1:7002"}};
  LayeredFlags layered = Layer({{"debug_address", "127.0.0.1:6002"}});
  EXPECT_THAT(layered.errors, IsEmpty());
  const FlagText& http = layered.flags["http_address"];
  EXPECT_EQ(http.text, "0.0.0.0:9000");
  EXPECT_EQ(http.source, FlagSource::kUpstream);
  EXPECT_EQ(http.variables, "PORT");
  const FlagText& grpc = layered.flags["grpc_address"];
  EXPECT_EQ(grpc.text, "127.0.0.1:7001");
  EXPECT_EQ(grpc.source, FlagSource::kEnvironment);
  EXPECT_EQ(grpc.variables, "SLUICE_GRPC_ADDRESS");
  EXPECT_EQ(layered.flags["debug_address"].text, "127.0.0.1:6002");
  EXPECT_EQ(layered.flags["debug_address"].source, FlagSource::kCommandLine);
  EXPECT_EQ(layered.flags.count("backend"), 0u);  // nothing set it: Settings' default
  EXPECT_THAT(Notes(layered),
              ElementsAre("--http_address=0.0.0.0:9000 from PORT",
                          "GRPC_PORT: --grpc_address=0.0.0.0:9001 overridden by "
                          "SLUICE_GRPC_ADDRESS (--grpc_address=127.0.0.1:7001 in force)",
                          "DEBUG_PORT: --debug_address=0.0.0.0:9002 overridden by the command "
                          "line (--debug_address=127.0.0.1:6002 in force)",
                          kUpstreamChargeNote));
}

// Verifies a SLUICE_* variable set to "" sets its flag to "", where upstream's variables
// count "" as unset.
TEST_F(FlagLayersTest, EmptyOwnVariableSetsItsFlag) {
  env_ = {{"SLUICE_DEBUG_ADDRESS", ""}, {"PORT", ""}};
  LayeredFlags layered = Layer();
  EXPECT_THAT(layered.errors, IsEmpty());
  EXPECT_EQ(layered.flags["debug_address"].text, "");
  EXPECT_EQ(layered.flags.count("http_address"), 0u);
}

// Verifies every error is reported, not the first: what upstream's variables cannot honour
// (one message), and each SLUICE_* value that does not parse, which is then not applied.
TEST_F(FlagLayersTest, ReportsEveryErrorAtOnce) {
  env_ = {{"NEAR_LIMIT_RATIO", "2"},
          {"BACKEND_TYPE", "memcache"},
          {"SLUICE_MAX_ENTRIES", "lots"},
          {"SLUICE_REDIS_TIMEOUT", "soon"},
          {"SLUICE_MAX_DESCRIPTORS", "9"}};
  LayeredFlags layered = Layer();
  ASSERT_EQ(layered.errors.size(), 3u);
  EXPECT_THAT(layered.errors[0],
              HasSubstr("envoyproxy/ratelimit settings Sluice cannot honour:\n  BACKEND_TYPE="
                        "memcache"));
  EXPECT_THAT(layered.errors[0], HasSubstr("\n  NEAR_LIMIT_RATIO=2: not a number from 0 to 1"));
  EXPECT_EQ(layered.errors[1],
            "environment variable SLUICE_REDIS_TIMEOUT='soon': Illegal value 'soon' specified "
            "for flag 'redis_timeout'");
  EXPECT_EQ(layered.errors[2],
            "environment variable SLUICE_MAX_ENTRIES='lots': Illegal value 'lots' specified "
            "for flag 'max_entries'");
  EXPECT_EQ(layered.flags.count("max_entries"), 0u);
  EXPECT_EQ(layered.flags["max_descriptors"].text, "9");
}

// Verifies values are kept as their flags print them, so the notes show what is in force.
TEST_F(FlagLayersTest, ValuesAreAsTheirFlagsPrintThem) {
  env_ = {{"SHADOW_MODE", "1"}, {"SLUICE_MAX_ENTRIES", "007"}};
  LayeredFlags layered = Layer();
  EXPECT_EQ(layered.flags["shadow_mode"].text, "true");
  EXPECT_EQ(layered.flags["max_entries"].text, "7");
  EXPECT_THAT(Notes(layered),
              ElementsAre("--shadow_mode=true from SHADOW_MODE", kUpstreamChargeNote));
}

// Verifies the environment alone, then the command line on top, give what both at once give.
TEST_F(FlagLayersTest, TwoStepsGiveWhatOneGives) {
  env_ = {{"PORT", "9000"}, {"SLUICE_SHADOW_MODE", "true"}};
  const std::map<std::string, std::string> command_line = {{"http_address", "127.0.0.1:1"}};
  const EnvLookup env = [this](absl::string_view name) -> std::optional<std::string> {
    auto it = env_.find(std::string(name));
    return it == env_.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  LayeredFlags two = LayerEnvironment(env);
  EXPECT_EQ(two.flags["http_address"].text, "0.0.0.0:9000");
  EXPECT_THAT(two.notes, IsEmpty());  // written once the command line is known
  LayerCommandLine(command_line, env, two);
  LayeredFlags one = Layer(command_line);
  EXPECT_EQ(two.flags["http_address"].text, one.flags["http_address"].text);
  EXPECT_EQ(two.flags["shadow_mode"].text, one.flags["shadow_mode"].text);
  EXPECT_EQ(two.notes, one.notes);
}

// Verifies a fake environment becomes Settings through the layers, with an upstream variable
// named in the error about the flag it set.
TEST_F(FlagLayersTest, FakeEnvironmentBecomesSettings) {
  env_ = {{"RUNTIME_ROOT", "/srv/runtime"}, {"RUNTIME_SUBDIRECTORY", "ratelimit"},
          {"REDIS_TYPE", "cluster"},        {"REDIS_URL", "10.0.0.1:6379,10.0.0.2:6379"},
          {"SLUICE_REDIS_DB", "2"},         {"NEAR_LIMIT_RATIO", "0.9"}};
  LayeredFlags layered = Layer();
  ASSERT_THAT(layered.errors, IsEmpty());
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  EXPECT_EQ(read.settings.config.path, "/srv/runtime/ratelimit/config");
  EXPECT_TRUE(read.settings.config.recursive);
  EXPECT_EQ(read.settings.backend.kind, BackendKind::kRedisCluster);
  EXPECT_THAT(read.settings.backend.redis.addresses, ElementsAre("10.0.0.1:6379", "10.0.0.2:6379"));
  EXPECT_EQ(read.settings.limiter.near_limit_ratio, 0.9);
  EXPECT_THAT(read.errors,
              ElementsAre("--redis_db: a Redis Cluster has only database 0 (--backend set by "
                          "REDIS_TYPE)"));
}

// Verifies upstream's defaults become Settings under upstream's variables (health waiting for
// Redis on upstream's schedule, connection age 24h and grace 1h, WARN, the debug port whose
// failure is only logged), a variable set and a SLUICE_* variable each winning over a default,
// and a connection age that is not a duration named by its variable.
TEST_F(FlagLayersTest, UpstreamDefaultsBecomeSettings) {
  env_ = {{"RUNTIME_ROOT", "/data"},
          {"REDIS_SOCKET_TYPE", "tcp"},
          {"REDIS_URL", "10.0.0.1:6379"},
          {"GRPC_MAX_CONNECTION_AGE", "90s"},
          {"REDIS_STARTUP_MAX_ELAPSED_TIME", "2m"},
          {"SLUICE_LOG_LEVEL", "info"}};
  LayeredFlags layered = Layer();
  ASSERT_THAT(layered.errors, IsEmpty());
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  ASSERT_THAT(read.errors, IsEmpty());
  const Settings& settings = read.settings;
  EXPECT_TRUE(settings.wait_for_backend.enabled);
  EXPECT_EQ(settings.wait_for_backend.initial_interval, absl::Seconds(1));
  EXPECT_EQ(settings.wait_for_backend.max_interval, absl::Seconds(30));
  EXPECT_EQ(settings.wait_for_backend.max_elapsed, absl::Minutes(2));
  EXPECT_EQ(settings.grpc.max_connection_age, absl::Seconds(90));
  EXPECT_EQ(settings.grpc.max_connection_age_grace, absl::Hours(1));
  EXPECT_EQ(settings.http.debug_address, "0.0.0.0:6070");
  EXPECT_FALSE(settings.http.debug_address_required);
  EXPECT_EQ(settings.log.level, LogLevel::kInfo);  // SLUICE_LOG_LEVEL over upstream's WARN
  EXPECT_THAT(layered.notes,
              ::testing::Contains("envoyproxy/ratelimit's default (LOG_LEVEL unset: WARN): "
                                  "--log_level=warning overridden by SLUICE_LOG_LEVEL "
                                  "(--log_level=info in force)"));

  env_ = {{"GRPC_MAX_CONNECTION_AGE", "a day"}};
  EXPECT_THAT(Layer().errors,
              ElementsAre(HasSubstr("GRPC_MAX_CONNECTION_AGE: Illegal value 'a day' specified for "
                                    "flag 'grpc_max_connection_age'")));

  // Sluice's own defaults without upstream's variables.
  env_ = {{"SLUICE_SHADOW_MODE", "true"}};
  read = SettingsFromFlags(Layer().flags);
  EXPECT_FALSE(read.settings.wait_for_backend.enabled);
  EXPECT_EQ(read.settings.grpc.max_connection_age, absl::ZeroDuration());
  EXPECT_EQ(read.settings.http.debug_address, "");
  EXPECT_TRUE(read.settings.http.debug_address_required);
  EXPECT_EQ(read.settings.log.level, LogLevel::kInfo);
}

// Verifies Envoy Gateway's tracing environment becomes valid tracing Settings through the
// layers, a SLUICE_* variable still winning, and the header values kept out of the notes.
TEST_F(FlagLayersTest, EnvoyGatewayTracingBecomesSettings) {
  env_ = {{"RUNTIME_ROOT", "/data"},
          {"TRACING_ENABLED", "true"},
          {"TRACING_SERVICE_NAME", "envoy-ratelimit"},
          {"TRACING_SERVICE_NAMESPACE", "envoy-gateway-system"},
          {"TRACING_SERVICE_INSTANCE_ID", "pod-name"},
          {"TRACING_SAMPLING_RATE", "0.5"},
          {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"},
          {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret"},
          {"SLUICE_TRACING_TIMEOUT", "3s"}};
  LayeredFlags layered = Layer();
  ASSERT_THAT(layered.errors, IsEmpty());
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  ASSERT_THAT(read.errors, IsEmpty());
  const TracingSettings& tracing = read.settings.tracing;
  EXPECT_TRUE(tracing.enabled);
  EXPECT_EQ(tracing.protocol, TracingProtocol::kHttp);
  EXPECT_EQ(tracing.endpoint, "http://collector:4318/v1/traces");
  EXPECT_EQ(tracing.service_name, "envoy-ratelimit");
  EXPECT_EQ(tracing.service_namespace, "envoy-gateway-system");
  EXPECT_EQ(tracing.service_instance_id, "pod-name");
  EXPECT_EQ(tracing.sampling_rate, 0.5);
  EXPECT_EQ(tracing.timeout, absl::Seconds(3));
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(tracing.headers, (Pairs{{"api-key", "s3cret"}}));
  EXPECT_THAT(layered.notes,
              ::testing::Contains("--tracing_headers=(hidden) from OTEL_EXPORTER_OTLP_HEADERS"));
  for (const std::string& note : layered.notes) {
    EXPECT_THAT(note, ::testing::Not(HasSubstr("s3cret")));
  }
}


// The image's environment (Dockerfile: ENV SLUICE_DEFAULT_CONFIG, no CMD).
constexpr char kImageDefault[] = "SLUICE_DEFAULT_CONFIG";
constexpr char kImageConfig[] = "/etc/sluice/config";
// What Sluice says when nothing names the rules.
constexpr char kConfigRequired[] =
    "--config is required (a YAML file or a directory of them; or envoyproxy/ratelimit's "
    "RUNTIME_ROOT and friends; or --config_source=xds)";

// A deployment written for envoyproxy/ratelimit's image: its config directory mounted at
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, Redis over TCP, no statsd.
std::map<std::string, std::string> UpstreamDeployment() {
  return {{"RUNTIME_ROOT", "/data"},
          {"RUNTIME_SUBDIRECTORY", "ratelimit"},
          {"REDIS_SOCKET_TYPE", "tcp"},
          {"REDIS_URL", "127.0.0.1:6379"},
          {"USE_STATSD", "false"}};
}

// Verifies a native run given nothing names no rules (the start stops, saying what would),
// --default_config being unset.
TEST_F(FlagLayersTest, DefaultConfigNothingGivenNamesNoRules) {
  LayeredFlags layered = Layer();
  EXPECT_FALSE(layered.upstream_environment);
  EXPECT_EQ(layered.flags.count("config"), 0u);
  EXPECT_EQ(layered.default_config_note, "");
  EXPECT_THAT(SettingsFromFlags(layered.flags).errors, ElementsAre(kConfigRequired));
}

// Verifies a native run with no arguments and upstream's variables (/bin/ratelimit as upstream's
// image runs it) reads the rules and Redis they name.
TEST_F(FlagLayersTest, DefaultConfigNoArgumentsUpstreamVariablesNameTheRules) {
  env_ = UpstreamDeployment();
  LayeredFlags layered = Layer();
  EXPECT_TRUE(layered.upstream_environment);
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_EQ(read.settings.config.path, "/data/ratelimit/config");
  EXPECT_TRUE(read.settings.config.recursive);
  EXPECT_EQ(read.settings.backend.kind, BackendKind::kRedis);
  EXPECT_THAT(read.settings.backend.redis.addresses, ElementsAre("127.0.0.1:6379"));
  EXPECT_EQ(layered.default_config_note, "");
}

// Verifies flags name the rules whether the image's default is there or not: a native run with
// flags is what it was, and so is the image run with them.
TEST_F(FlagLayersTest, DefaultConfigFlagsNameTheRules) {
  const std::map<std::string, std::string> flags = {{"config", "/rules"}, {"backend", "redis"}};
  LayeredFlags native = Layer(flags);
  env_ = {{kImageDefault, kImageConfig}};
  LayeredFlags image = Layer(flags);
  for (const LayeredFlags* layered : {&native, &image}) {
    SettingsOrErrors read = SettingsFromFlags(layered->flags);
    ASSERT_THAT(read.errors, IsEmpty());
    EXPECT_EQ(read.settings.config.path, "/rules");
    EXPECT_EQ(read.settings.backend.kind, BackendKind::kRedis);
    EXPECT_EQ(layered->flags.at("config").source, FlagSource::kCommandLine);
    EXPECT_EQ(layered->default_config_note, "");
  }
}

// Verifies the image run bare (`docker run IMAGE`: no command, no variable but its own) serves
// its example config, saying so; so does the image given other flags or SLUICE_* variables but
// no config, or the standard OTEL_* variables alone (which are not upstream's environment).
TEST_F(FlagLayersTest, DefaultConfigServesWhenNothingElseNamesRules) {
  env_ = {{kImageDefault, kImageConfig}};
  LayeredFlags layered = Layer();
  EXPECT_FALSE(layered.upstream_environment);
  const FlagText& config = layered.flags["config"];
  EXPECT_EQ(config.text, kImageConfig);
  EXPECT_EQ(config.source, FlagSource::kEnvironment);
  EXPECT_EQ(config.variables, kImageDefault);
  EXPECT_EQ(layered.default_config_note,
            "--config=/etc/sluice/config from --default_config (SLUICE_DEFAULT_CONFIG): no "
            "--config, no --config_source=xds and none of envoyproxy/ratelimit's variables");
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_EQ(read.settings.config.path, kImageConfig);
  EXPECT_EQ(read.settings.config.source, ConfigSourceKind::kFiles);
  EXPECT_EQ(read.settings.backend.kind, BackendKind::kMemory);

  read = SettingsFromFlags(Layer({{"backend", "redis"}, {"redis_addresses", "r:6379"}}).flags);
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_EQ(read.settings.config.path, kImageConfig);
  EXPECT_EQ(read.settings.backend.kind, BackendKind::kRedis);

  env_ = {{kImageDefault, kImageConfig},
          {"SLUICE_BACKEND", "redis"},
          {"SLUICE_CONFIG_SOURCE", "files"},
          {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}};
  layered = Layer();
  EXPECT_FALSE(layered.upstream_environment);
  EXPECT_EQ(SettingsFromFlags(layered.flags).settings.config.path, kImageConfig);

  // Given on the command line, it is credited to it.
  env_ = {};
  layered = Layer({{"default_config", "/rules"}});
  EXPECT_EQ(layered.flags["config"].text, "/rules");
  EXPECT_THAT(layered.default_config_note, HasSubstr("from --default_config (the command line)"));
}

// Verifies the image run with no command and upstream's variables behaves as /bin/ratelimit
// with no arguments, exactly: every flag, note and warning as without the image's default, for
// a runtime directory, for Envoy Gateway's config over xDS, and for variables that name no rules
// (the start stops, saying why the image's default is not used).
TEST_F(FlagLayersTest, DefaultConfigUnusedUnderUpstreamVariables) {
  const std::vector<std::map<std::string, std::string>> deployments = {
      UpstreamDeployment(),
      {{"CONFIG_TYPE", "GRPC_XDS_SOTW"},
       {"CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"},
       {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"},
       {"REDIS_SOCKET_TYPE", "tcp"},
       {"REDIS_URL", "redis:6379"}},
      {{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"}},
      {{"LOG_LEVEL", "debug"}},
  };
  for (const auto& deployment : deployments) {
    env_ = deployment;
    LayeredFlags native = Layer();
    env_[kImageDefault] = kImageConfig;
    LayeredFlags image = Layer();
    EXPECT_TRUE(image.upstream_environment);
    EXPECT_EQ(image.default_config_note, "");
    ASSERT_EQ(image.flags.count("default_config"), 1u);
    image.flags.erase("default_config");
    ASSERT_EQ(image.flags.size(), native.flags.size());
    for (const auto& [flag, text] : native.flags) {
      EXPECT_EQ(image.flags[flag].text, text.text) << flag;
      EXPECT_EQ(image.flags[flag].source, text.source) << flag;
    }
    EXPECT_EQ(image.notes, native.notes);
    EXPECT_EQ(image.warnings, native.warnings);
    EXPECT_EQ(image.errors, native.errors);
  }

  env_ = UpstreamDeployment();
  env_[kImageDefault] = kImageConfig;
  EXPECT_EQ(SettingsFromFlags(Layer().flags).settings.config.path, "/data/ratelimit/config");

  env_ = deployments[1];
  env_[kImageDefault] = kImageConfig;
  SettingsOrErrors read = SettingsFromFlags(Layer().flags);
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_EQ(read.settings.config.source, ConfigSourceKind::kXds);
  EXPECT_EQ(read.settings.config.path, "");

  env_ = deployments[2];
  EXPECT_THAT(SettingsFromFlags(Layer().flags).errors, ElementsAre(kConfigRequired));
  env_[kImageDefault] = kImageConfig;
  EXPECT_THAT(SettingsFromFlags(Layer().flags).errors,
              ElementsAre(absl::StrCat(kConfigRequired,
                                       "; --default_config=/etc/sluice/config is not used under "
                                       "envoyproxy/ratelimit's variables, which name no rules "
                                       "here")));
}

// Verifies anything that names the rules wins over the image's default: --config and
// SLUICE_CONFIG, --config_source=xds; and, with upstream's variables too, the command line
// still wins over them as documented (README, Flags), the note saying so.
TEST_F(FlagLayersTest, DefaultConfigLosesToAnythingNamingTheRules) {
  env_ = {{kImageDefault, kImageConfig}, {"SLUICE_CONFIG", "/own"}};
  LayeredFlags layered = Layer();
  EXPECT_EQ(layered.flags["config"].text, "/own");
  EXPECT_EQ(layered.default_config_note, "");

  env_ = {{kImageDefault, kImageConfig}};
  layered = Layer({{"config_source", "xds"}});
  EXPECT_EQ(layered.flags.count("config"), 0u);
  EXPECT_EQ(layered.default_config_note, "");

  env_ = UpstreamDeployment();
  env_[kImageDefault] = kImageConfig;
  layered = Layer({{"config", "/rules"}});
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  ASSERT_THAT(read.errors, IsEmpty());
  EXPECT_EQ(read.settings.config.path, "/rules");
  EXPECT_EQ(read.settings.backend.kind, BackendKind::kRedis);  // upstream's, not overridden
  EXPECT_THAT(layered.notes,
              ::testing::Contains("RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY, "
                                  "RUNTIME_IGNOREDOTFILES: --config=/data/ratelimit/config "
                                  "overridden by the command line (--config=/rules in force)"));
  EXPECT_EQ(layered.default_config_note, "");
}

}  // namespace
}  // namespace sluice
