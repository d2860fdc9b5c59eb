#include "server/settings/upstream_env.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "server/settings/listen_address.h"
#include "server/settings/settings.h"
#include "server/settings/statsd_mogrifiers_flag.h"

namespace sluice {
namespace {

// What one remembered over-limit key costs at least: the key, its entry and the map's share.
// LOCAL_CACHE_SIZE_IN_BYTES is divided by it to size --over_limit_cache_keys, and sets
// --over_limit_cache_max_mib, the bound in bytes, which then binds first.
constexpr int64_t kBytesPerCachedKey = 128;

// The flags one Redis (the main one or the per-second one) is described by.
struct RedisFlags {
  absl::string_view variable_prefix;  // "REDIS_" or "REDIS_PERSECOND_"
  absl::string_view default_url;      // upstream's default REDIS_URL for this Redis
  absl::string_view backend;          // flag names
  absl::string_view addresses;
  absl::string_view username;
  absl::string_view password;
  absl::string_view connections;
  absl::string_view tls;
  absl::string_view sentinels;
  absl::string_view sentinel_master;
  absl::string_view sentinel_username;
  absl::string_view sentinel_password;
};

constexpr RedisFlags kMainRedis = {"REDIS_",
                                   "/var/run/nutcracker/ratelimit.sock",
                                   "backend",
                                   "redis_addresses",
                                   "redis_username",
                                   "redis_password",
                                   "redis_connections",
                                   "redis_tls",
                                   "redis_sentinels",
                                   "redis_sentinel_master",
                                   "redis_sentinel_username",
                                   "redis_sentinel_password"};
constexpr RedisFlags kPerSecondRedis = {"REDIS_PERSECOND_",
                                        "/var/run/nutcracker/ratelimitpersecond.sock",
                                        "redis_per_second_backend",
                                        "redis_per_second_addresses",
                                        "redis_per_second_username",
                                        "redis_per_second_password",
                                        "redis_per_second_connections",
                                        "redis_per_second_tls",
                                        "redis_per_second_sentinels",
                                        "redis_per_second_sentinel_master",
                                        "redis_per_second_sentinel_username",
                                        "redis_per_second_sentinel_password"};

// Upstream's one TLS setup for both Redis pools (REDIS_TLS_*), read when either has TLS on.
constexpr std::pair<absl::string_view, absl::string_view> kRedisTlsFiles[] = {
    {"REDIS_TLS_CACERT", "redis_tls_ca"},
    {"REDIS_TLS_CLIENT_CERT", "redis_tls_cert"},
    {"REDIS_TLS_CLIENT_KEY", "redis_tls_key"},
};
constexpr absl::string_view kRedisTlsSkipHostname = "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION";

// Tuning knobs of upstream's Redis pool that Sluice's client has no use for.
constexpr absl::string_view kRedisTuning[] = {
    "PIPELINE_WINDOW", "PIPELINE_LIMIT", "CLUSTER_PIPELINE_PARALLELISM", "POOL_ON_EMPTY_BEHAVIOR",
    "HEALTH_CHECK_ACTIVE_CONNECTION"};
// Upstream's retries of its first Redis connection (driver_impl.go's NewClientImpl), its
// health unhealthy meanwhile: the --wait_for_backend schedule.
constexpr std::pair<absl::string_view, absl::string_view> kStartupWait[] = {
    {"REDIS_STARTUP_INITIAL_INTERVAL", "wait_for_backend_initial_interval"},
    {"REDIS_STARTUP_MAX_INTERVAL", "wait_for_backend_max_interval"},
    {"REDIS_STARTUP_MAX_ELAPSED_TIME", "wait_for_backend_max_elapsed"},
};
// GRPC_MAX_CONNECTION_AGE, GRPC_MAX_CONNECTION_AGE_GRACE and their flags.
constexpr std::pair<absl::string_view, absl::string_view> kConnectionAge[] = {
    {"GRPC_MAX_CONNECTION_AGE", "grpc_max_connection_age"},
    {"GRPC_MAX_CONNECTION_AGE_GRACE", "grpc_max_connection_age_grace"},
};
// What a deployment configured by upstream's variables gets for a variable it does not set, as
// upstream's settings.go defaults it.
struct UpstreamDefault {
  absl::string_view variable;
  absl::string_view flag;
  absl::string_view value;     // the flag's
  absl::string_view upstream;  // upstream's, as its settings.go writes it
};
constexpr UpstreamDefault kUpstreamDefaults[] = {
    {"LOG_LEVEL", "log_level", "warning", "WARN"},
    {"GRPC_MAX_CONNECTION_AGE", "grpc_max_connection_age", "24h", "24h"},
    {"GRPC_MAX_CONNECTION_AGE_GRACE", "grpc_max_connection_age_grace", "1h", "1h"},
    {"REDIS_STARTUP_INITIAL_INTERVAL", "wait_for_backend_initial_interval", "1s", "1s"},
    {"REDIS_STARTUP_MAX_INTERVAL", "wait_for_backend_max_interval", "30s", "30s"},
    {"REDIS_STARTUP_MAX_ELAPSED_TIME", "wait_for_backend_max_elapsed", "0s", "0, forever"},
};
// Upstream's stats variables besides its switches (USE_STATSD, USE_DOG_STATSD, DISABLE_STATS):
// settings.go's, and STATSD_PROTOCOL, which its plain statsd sink (lyft/gostats) reads itself.
constexpr absl::string_view kStatsVariables[] = {
    "STATSD_HOST",          "STATSD_PORT", "STATSD_PROTOCOL",          "EXTRA_TAGS",
    "STATS_FLUSH_INTERVAL", "USE_DOG_STATSD_MOGRIFIERS"};
// The global tags datadog-go (upstream's DogStatsD client, v5.5.0 statsd.go) adds from the
// environment, in its order: (variable, tag).
constexpr std::pair<absl::string_view, absl::string_view> kDatadogEnvTags[] = {
    {"DD_ENTITY_ID", "dd.internal.entity_id"},
    {"DD_ENV", "env"},
    {"DD_SERVICE", "service"},
    {"DD_VERSION", "version"}};
// Read only with USE_PROMETHEUS=true, as upstream reads them.
constexpr absl::string_view kPrometheusVariables[] = {
    "PROMETHEUS_ADDR", "PROMETHEUS_PATH", "PROMETHEUS_MAPPER_YAML",
    "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"};

// Upstream booleans that are Sluice flags of the same meaning.
constexpr std::pair<absl::string_view, absl::string_view> kBoolFlags[] = {
    {"SHADOW_MODE", "shadow_mode"},
    {"QUOTA_MODE", "quota_mode"},
    {"MERGE_DOMAIN_CONFIG", "merge_domain_config"},
    {"FORCE_START_WITHOUT_INITIAL_CONFIG", "force_start_without_initial_config"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "healthy_with_at_least_one_config_loaded"},
    {"RESPONSE_DYNAMIC_METADATA", "response_dynamic_metadata"},
    {"LIMIT_RESPONSE_HEADERS_ENABLED", "rate_limit_headers"},
    {"USE_CALENDAR_MONTH_RATE_LIMIT", "calendar_months"},
};
constexpr std::pair<absl::string_view, absl::string_view> kStringFlags[] = {
    {"LIMIT_LIMIT_HEADER", "rate_limit_limit_header"},
    {"LIMIT_REMAINING_HEADER", "rate_limit_remaining_header"},
    {"LIMIT_RESET_HEADER", "rate_limit_reset_header"},
    {"CACHE_KEY_PREFIX", "redis_key_prefix"},
};

// Upstream's tracing variables besides TRACING_ENABLED, read only with TRACING_ENABLED=true.
constexpr absl::string_view kTracingVariables[] = {
    "TRACING_SERVICE_NAME", "TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID",
    "TRACING_EXPORTER_PROTOCOL", "TRACING_SAMPLING_RATE"};
// Standard OpenTelemetry variables that upstream's tracer does not read either: it sets its own
// sampler and resource.
constexpr absl::string_view kOtelIgnored[] = {"OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER",
                                              "OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME",
                                              "OTEL_RESOURCE_ATTRIBUTES"};
// Mutual TLS to the collector, which Sluice's exporter does not do.
constexpr absl::string_view kOtelClientTls[] = {
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY"};

// `text` with each %XX replaced by the byte it encodes, as Go's url.PathUnescape (which
// upstream's exporter reads OTEL_EXPORTER_OTLP_HEADERS with) does: '+' stays '+'. Nullopt when
// a '%' is not followed by two hexadecimal digits.
std::optional<std::string> PercentDecode(absl::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    c = absl::ascii_tolower(static_cast<unsigned char>(c));
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size() || hex(text[i + 1]) < 0 || hex(text[i + 2]) < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2])));
    i += 2;
  }
  return out;
}

// Go's strconv.ParseBool, which envoyproxy/ratelimit's settings use; nullopt when `text` is not
// one of its words.
std::optional<bool> GoBool(absl::string_view text) {
  for (absl::string_view yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == yes) {
      return true;
    }
  }
  for (absl::string_view no : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == no) {
      return false;
    }
  }
  return std::nullopt;
}

class Translator {
 public:
  explicit Translator(const EnvLookup& env) : env_(env) {}

  UpstreamTranslation Run() {
    Listeners();
    Logging();
    Runtime();
    Backend();
    Limiter();
    Prometheus();
    Tracing();
    NotHonoured();
    Stats();
    // Whether the environment is upstream's: any of upstream's own variables set. The standard
    // OTEL_* variables below do not count: they are read whenever they are set, upstream's
    // environment or not (upstream's exporter reads them too, and an OpenTelemetry operator may
    // inject them into any pod), and they alone must not bring upstream's charging.
    const bool upstream = !out_.flags.empty() || !out_.warnings.empty() || !out_.errors.empty();
    OpenTelemetry();
    UpstreamCharge(upstream);
    UpstreamDefaults(upstream);
    out_.upstream_environment = upstream;
    return std::move(out_);
  }

 private:
  std::optional<std::string> Get(absl::string_view name) {
    std::optional<std::string> value = env_(name);
    if (value.has_value() && value->empty()) {
      return std::nullopt;
    }
    return value;
  }
  bool IsSet(absl::string_view name) { return Get(name).has_value(); }

  void Set(absl::string_view flag, std::string value, std::string source) {
    out_.flags.push_back(FlagAssignment{std::string(flag), std::move(value), std::move(source)});
  }
  void Warn(std::string text) { out_.warnings.push_back(std::move(text)); }
  void Fail(std::string text) { out_.errors.push_back(std::move(text)); }

  // Go's strconv.ParseBool, which envoyproxy/ratelimit's settings use. Unset: nullopt.
  std::optional<bool> Bool(absl::string_view name) {
    std::optional<std::string> text = Get(name);
    if (!text.has_value()) {
      return std::nullopt;
    }
    if (std::optional<bool> value = GoBool(*text)) {
      return value;
    }
    Fail(absl::StrCat(name, "=", *text, ": not a boolean (true or false)"));
    return std::nullopt;
  }
  // Bool without reporting a bad value (which another step reports).
  std::optional<bool> QuietBool(absl::string_view name) {
    std::optional<std::string> text = Get(name);
    return text.has_value() ? GoBool(*text) : std::nullopt;
  }

  std::optional<int64_t> Int(absl::string_view name, int64_t min, int64_t max) {
    std::optional<std::string> text = Get(name);
    if (!text.has_value()) {
      return std::nullopt;
    }
    int64_t value = 0;
    if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
      Fail(absl::StrCat(name, "=", *text, ": not a whole number from ", min, " to ", max));
      return std::nullopt;
    }
    return value;
  }

  // The names of `names` that are set, joined with ", ".
  std::string SetNames(std::initializer_list<absl::string_view> names) {
    std::vector<absl::string_view> set;
    for (absl::string_view name : names) {
      if (IsSet(name)) {
        set.push_back(name);
      }
    }
    return absl::StrJoin(set, ", ");
  }

  // HOST:PORT from a pair of variables; nothing when neither is set.
  void Address(absl::string_view host_var, absl::string_view port_var,
               absl::string_view default_host, int default_port, absl::string_view flag) {
    std::optional<std::string> host = Get(host_var);
    std::optional<int64_t> port = Int(port_var, 0, 65535);
    if (!host.has_value() && !IsSet(port_var)) {
      return;
    }
    std::string h = host.value_or(std::string(default_host));
    if (absl::StrContains(h, ':') && !absl::StartsWith(h, "[")) {
      h = absl::StrCat("[", h, "]");  // an IPv6 literal
    }
    Set(flag, absl::StrCat(h, ":", port.value_or(default_port)), SetNames({host_var, port_var}));
  }

  void Listeners() {
    Address("HOST", "PORT", "0.0.0.0", 8080, "http_address");
    if (std::optional<std::string> uds = Get("GRPC_UDS")) {
      Set("grpc_address", absl::StrCat("unix:", *uds), "GRPC_UDS");
    } else {
      Address("GRPC_HOST", "GRPC_PORT", "0.0.0.0", 8081, "grpc_address");
    }
    Address("DEBUG_HOST", "DEBUG_PORT", "0.0.0.0", 6070, "debug_address");
    if (Bool("GRPC_SERVER_USE_TLS").value_or(false)) {
      Set("tls_cert", Get("GRPC_SERVER_TLS_CERT").value_or(""), "GRPC_SERVER_TLS_CERT");
      Set("tls_key", Get("GRPC_SERVER_TLS_KEY").value_or(""), "GRPC_SERVER_TLS_KEY");
      if (std::optional<std::string> ca = Get("GRPC_CLIENT_TLS_CACERT")) {
        Set("tls_client_ca", *ca, "GRPC_CLIENT_TLS_CACERT");
        if (std::optional<std::string> san = Get("GRPC_CLIENT_TLS_SAN")) {
          Set("tls_client_san", *san, "GRPC_CLIENT_TLS_SAN");
        }
      } else if (IsSet("GRPC_CLIENT_TLS_SAN")) {
        Warn("GRPC_CLIENT_TLS_SAN: no client certificate is asked for without "
             "GRPC_CLIENT_TLS_CACERT, so there is no name to check (as upstream)");
      }
    }
    // Upstream passes them to its gRPC server's keepalive.ServerParameters (server_impl.go's
    // newServer), where 0 means no limit, as --grpc_max_connection_age* read it.
    for (const auto& [name, flag] : kConnectionAge) {
      if (std::optional<std::string> value = Get(name)) {
        Set(flag, *value, std::string(name));
      }
    }
  }

  void Logging() {
    if (std::optional<std::string> level = Get("LOG_LEVEL")) {
      const std::string lower = absl::AsciiStrToLower(*level);
      std::string mapped;
      if (lower == "trace" || lower == "debug") {
        mapped = "debug";
      } else if (lower == "info") {
        mapped = "info";
      } else if (lower == "warn" || lower == "warning") {
        mapped = "warning";
      } else if (lower == "error" || lower == "fatal" || lower == "panic") {
        mapped = "error";
      } else {
        Fail(absl::StrCat("LOG_LEVEL=", *level,
                          ": not a log level (trace, debug, info, warn, error, fatal, panic)"));
      }
      if (!mapped.empty()) {
        Set("log_level", mapped, "LOG_LEVEL");
      }
    }
    if (std::optional<std::string> format = Get("LOG_FORMAT")) {
      const std::string lower = absl::AsciiStrToLower(*format);
      if (lower == "text" || lower == "json") {
        Set("log_format", lower, "LOG_FORMAT");
      } else {
        Fail(absl::StrCat("LOG_FORMAT=", *format, ": not text or json"));
      }
    }
  }

  // "k=v,k2=v2" (sep '=') or "k:v,k2:v2" (sep ':') as upstream reads it, for a Sluice flag of
  // the same form: items without `sep` are dropped, as upstream drops them, with a warning.
  std::string Pairs(absl::string_view name, char sep) {
    const std::string text = Get(name).value_or("");
    std::vector<absl::string_view> kept;
    for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
      if (item.find(sep) == absl::string_view::npos || item.front() == sep) {
        Warn(absl::StrCat(name, ": '", item, "' has no key", std::string(1, sep),
                          "value; ignored, as envoyproxy/ratelimit ignores it"));
        continue;
      }
      kept.push_back(item);
    }
    return absl::StrJoin(kept, ",");
  }

  // CONFIG_TYPE=GRPC_XDS_SOTW: the config comes from a management server; the CONFIG_GRPC_XDS_*
  // and XDS_CLIENT_* variables describe it (read only then, as upstream reads them).
  void Xds() {
    Set("config_source", "xds", "CONFIG_TYPE");
    constexpr std::pair<absl::string_view, absl::string_view> kPlain[] = {
        {"CONFIG_GRPC_XDS_NODE_ID", "xds_node_id"},
        {"CONFIG_GRPC_XDS_SERVER_URL", "xds_server"},
        {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "xds_connect_retry_interval"},
        {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "xds_backoff_initial"},
        {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "xds_backoff_max"},
        {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "xds_backoff_random_factor"},
        {"XDS_CLIENT_BACKOFF_JITTER", "xds_backoff_jitter"},
        {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "xds_max_message_bytes"},
    };
    for (const auto& [name, flag] : kPlain) {
      if (std::optional<std::string> value = Get(name)) {
        Set(flag, *value, std::string(name));
      }
    }
    if (IsSet("CONFIG_GRPC_XDS_NODE_METADATA")) {
      Set("xds_node_metadata", Pairs("CONFIG_GRPC_XDS_NODE_METADATA", '='),
          "CONFIG_GRPC_XDS_NODE_METADATA");
    }
    if (IsSet("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS")) {
      Set("xds_headers", Pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ':'),
          "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS");
    }
    if (!Bool("CONFIG_GRPC_XDS_SERVER_USE_TLS").value_or(false)) {
      return;
    }
    Set("xds_tls", "true", "CONFIG_GRPC_XDS_SERVER_USE_TLS");
    constexpr std::pair<absl::string_view, absl::string_view> kTls[] = {
        {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "xds_tls_cert"},
        {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "xds_tls_key"},
        {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "xds_tls_ca"},
        {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds_tls_server_name"},
    };
    for (const auto& [name, flag] : kTls) {
      if (std::optional<std::string> value = Get(name)) {
        Set(flag, *value, std::string(name));
      }
    }
  }

  void Runtime() {
    if (std::optional<std::string> type = Get("CONFIG_TYPE")) {
      const std::string upper = absl::AsciiStrToUpper(*type);
      if (upper == "GRPC_XDS_SOTW") {
        Xds();
        // The runtime directory is not read when the config comes over xDS (nor upstream's).
        return;
      }
      if (upper != "FILE") {
        Fail(absl::StrCat("CONFIG_TYPE=", *type, ": not FILE or GRPC_XDS_SOTW"));
      }
    }
    std::optional<std::string> root = Get("RUNTIME_ROOT");
    std::optional<std::string> sub = Get("RUNTIME_SUBDIRECTORY");
    std::optional<std::string> app = Get("RUNTIME_APPDIRECTORY");
    std::optional<bool> ignore_dot_files = Bool("RUNTIME_IGNOREDOTFILES");
    Bool("RUNTIME_WATCH_ROOT");  // checked only: Sluice watches the whole tree either way
    if (!root.has_value() && !sub.has_value() && !app.has_value() &&
        !IsSet("RUNTIME_IGNOREDOTFILES") && !IsSet("RUNTIME_WATCH_ROOT")) {
      return;
    }
    std::vector<std::string> parts;
    for (const std::string& part : {root.value_or("/srv/runtime_data/current"),
                                    sub.value_or(""), app.value_or("config")}) {
      absl::string_view trimmed = part;
      if (!parts.empty()) {
        absl::ConsumePrefix(&trimmed, "/");
      }
      while (trimmed.size() > 1 && absl::ConsumeSuffix(&trimmed, "/")) {
      }
      if (!trimmed.empty()) {
        parts.emplace_back(trimmed);
      }
    }
    const std::string source =
        "RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY, RUNTIME_IGNOREDOTFILES";
    Set("config", absl::StrJoin(parts, "/"), source);
    Set("config_recursive", "true", source);
    Set("config_ignore_dot_files", ignore_dot_files.value_or(false) ? "true" : "false", source);
  }

  // "password", or "user:password" for a Redis 6 ACL user (upstream's driver cuts at the first
  // ':' for REDIS_AUTH and REDIS_SENTINEL_AUTH alike).
  void Credentials(absl::string_view auth, absl::string_view username_flag,
                   absl::string_view password_flag, const std::string& source) {
    const size_t colon = auth.find(':');
    if (colon != absl::string_view::npos) {
      Set(username_flag, std::string(auth.substr(0, colon)), source);
      Set(password_flag, std::string(auth.substr(colon + 1)), source);
    } else {
      Set(password_flag, std::string(auth), source);
    }
  }

  // A URL's scheme: rediss:// (TLS), redis:// or none.
  struct UrlSchemes {
    bool tls = false;
    bool plain = false;
  };

  // The addresses of a single Redis or a cluster from its URL: HOST:PORT, a socket path (single,
  // REDIS_SOCKET_TYPE=unix) or redis://[USER[:PASSWORD]@]HOST:PORT[/DB], whose credentials are
  // taken into `auth` unless it holds some. False (after Fail) when the URL is wrong.
  bool ServerAddresses(const RedisFlags& flags, bool cluster, std::optional<std::string>& auth,
                       UrlSchemes& schemes) {
    const std::string prefix(flags.variable_prefix);
    auto var = [&prefix](absl::string_view name) { return absl::StrCat(prefix, name); };
    std::string url = Get(var("URL")).value_or(std::string(flags.default_url));
    std::string socket = absl::AsciiStrToLower(Get(var("SOCKET_TYPE")).value_or("unix"));
    if (socket != "unix" && socket != "tcp") {
      Fail(absl::StrCat(var("SOCKET_TYPE"), "=", *Get(var("SOCKET_TYPE")), ": not tcp or unix"));
      return false;
    }
    const bool tcp = socket == "tcp" || cluster;
    std::vector<std::string> addresses;
    // rediss:// is the URL scheme of Redis over TLS (IANA's, redis-cli -u's, every major client
    // library's). Upstream's client (radix) parses redis:// only and dials a rediss:// URL as a
    // host name, which fails: no working upstream setup has one. Whoever writes it means TLS,
    // so it turns TLS on for this Redis as REDIS_TLS=true does; redis:// beside it in one list
    // contradicts it.
    for (absl::string_view one : absl::StrSplit(url, ',', absl::SkipWhitespace())) {
      one = absl::StripAsciiWhitespace(one);
      const bool secure = absl::ConsumePrefix(&one, "rediss://");
      const bool plain = !secure && absl::ConsumePrefix(&one, "redis://");
      schemes.tls = schemes.tls || secure;
      schemes.plain = schemes.plain || plain;
      if (secure || plain) {
        // [user[:password]@]host:port[/db]: credentials only when AUTH does not give them.
        if (size_t at = one.rfind('@'); at != absl::string_view::npos) {
          if (!auth.has_value()) {
            auth = std::string(one.substr(0, at));
          }
          one = one.substr(at + 1);
        }
        if (size_t slash = one.find('/'); slash != absl::string_view::npos) {
          absl::string_view db = one.substr(slash + 1);
          one = one.substr(0, slash);
          if (!db.empty() && db != "0") {
            if (flags.variable_prefix == kMainRedis.variable_prefix && !cluster) {
              Set("redis_db", std::string(db), var("URL"));
            } else {
              Fail(absl::StrCat(var("URL"), ": a database number is only possible for the main, "
                                            "standalone Redis"));
            }
          }
        }
        if (absl::Status valid = ValidateHostPort(one, 1); !valid.ok()) {
          // The address only: the URL may hold a password.
          Fail(absl::StrCat(var("URL"), ": ", secure ? "rediss" : "redis", ":// address ",
                            valid.message()));
          return false;
        }
        addresses.emplace_back(one);
      } else if (!tcp) {
        addresses.push_back(absl::StrCat("unix:", one));
      } else {
        if (one.find('@') != absl::string_view::npos) {
          // Not quoted: what precedes '@' may be a password.
          Fail(absl::StrCat(var("URL"), ": credentials (USER:PASSWORD@) need the redis:// form, "
                                        "redis://[USER[:PASSWORD]@]HOST:PORT[/DB]"));
          return false;
        }
        if (absl::Status valid = ValidateHostPort(one, 1); !valid.ok()) {
          Fail(absl::StrCat(var("URL"), ": ", valid.message(), " (", var("URL"),
                            " takes HOST:PORT or redis://[USER[:PASSWORD]@]HOST:PORT[/DB]",
                            cluster ? ", comma-separated" : "", ")"));
          return false;
        }
        addresses.emplace_back(one);
      }
    }
    if (addresses.empty()) {
      Fail(absl::StrCat(var("URL"), " is empty"));
      return false;
    }
    if (!cluster && addresses.size() > 1) {
      Fail(absl::StrCat(var("URL"), ": a single Redis takes one address (", var("TYPE"),
                        "=cluster takes several)"));
      return false;
    }
    std::string addresses_from = SetNames({var("URL"), var("SOCKET_TYPE")});
    if (!IsSet(var("URL"))) {
      absl::StrAppend(&addresses_from, addresses_from.empty() ? "" : " and ", "upstream's default ",
                      var("URL"));
    }
    Set(flags.addresses, absl::StrJoin(addresses, ","), addresses_from);
    return true;
  }

  // TYPE=sentinel: the URL is "<master name>,<sentinel1>,...,<sentinelN>", as upstream's driver
  // splits it, with at least one sentinel. Each sentinel is HOST:PORT, or a URL radix reads:
  // redis://[USER[:PASSWORD]@]HOST:PORT, whose credentials are the sentinels' (used when
  // SENTINEL_AUTH gives none), or rediss:// (TLS on, as for a single Redis). Upstream reaches
  // the sentinels and the master over TCP whatever SOCKET_TYPE says, and so does Sluice. False
  // (after Fail) when the URL is wrong.
  bool SentinelAddresses(const RedisFlags& flags, UrlSchemes& schemes) {
    const std::string prefix(flags.variable_prefix);
    auto var = [&prefix](absl::string_view name) { return absl::StrCat(prefix, name); };
    const std::string form = "<master name>,<sentinel1>,...,<sentinelN>";
    std::optional<std::string> url = Get(var("URL"));
    if (!url.has_value()) {
      Fail(absl::StrCat(var("TYPE"), "=sentinel needs ", var("URL"), "=", form));
      return false;
    }
    std::vector<absl::string_view> parts;
    for (absl::string_view one : absl::StrSplit(*url, ',', absl::SkipWhitespace())) {
      parts.push_back(absl::StripAsciiWhitespace(one));
    }
    // Not quoted: a URL written without the master's name may hold a password.
    if (parts.size() < 2) {
      Fail(absl::StrCat(var("URL"), ": with ", var("TYPE"),
                        "=sentinel, expected the master's name and then the sentinels, ", form,
                        " (at least one sentinel)"));
      return false;
    }
    const absl::string_view master = parts.front();
    if (absl::StrContains(master, "://") || ValidateHostPort(master, 1).ok()) {
      Fail(absl::StrCat(var("URL"), ": with ", var("TYPE"), "=sentinel, the first entry is the "
                        "master's name as the sentinels know it, not an address: ", form));
      return false;
    }
    std::vector<std::string> sentinels;
    std::optional<std::string> url_auth;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view one = parts[i];
      const bool secure = absl::ConsumePrefix(&one, "rediss://");
      const bool plain = !secure && absl::ConsumePrefix(&one, "redis://");
      schemes.tls = schemes.tls || secure;
      schemes.plain = schemes.plain || plain;
      if (secure || plain) {
        if (size_t at = one.rfind('@'); at != absl::string_view::npos) {
          const std::string auth(one.substr(0, at));
          if (url_auth.has_value() && *url_auth != auth) {
            Fail(absl::StrCat(var("URL"), ": the sentinels' URLs give different credentials; "
                              "Sluice asks every sentinel with one set (",
                              var("SENTINEL_AUTH"), ")"));
            return false;
          }
          url_auth = auth;
          one = one.substr(at + 1);
        }
        if (size_t slash = one.find('/'); slash != absl::string_view::npos) {
          if (slash + 1 < one.size()) {
            // Upstream's client would SELECT it on the sentinel, which has no databases.
            Fail(absl::StrCat(var("URL"), ": a database number means nothing to a sentinel; "
                              "the master's database is --redis_db"));
            return false;
          }
          one = one.substr(0, slash);
        }
      } else if (one.find('@') != absl::string_view::npos) {
        Fail(absl::StrCat(var("URL"), ": credentials (USER:PASSWORD@) need the redis:// form, "
                                      "redis://[USER[:PASSWORD]@]HOST:PORT"));
        return false;
      }
      if (absl::Status valid = ValidateHostPort(one, 1); !valid.ok()) {
        Fail(absl::StrCat(var("URL"), ": sentinel ", valid.message(),
                          " (each sentinel is HOST:PORT or redis://[USER[:PASSWORD]@]HOST:PORT, "
                          "reached over TCP)"));
        return false;
      }
      sentinels.emplace_back(one);
    }
    Set(flags.sentinels, absl::StrJoin(sentinels, ","), var("URL"));
    Set(flags.sentinel_master, std::string(master), var("URL"));
    if (std::optional<std::string> auth = Get(var("SENTINEL_AUTH"))) {
      Credentials(*auth, flags.sentinel_username, flags.sentinel_password, var("SENTINEL_AUTH"));
    } else if (url_auth.has_value()) {
      Credentials(*url_auth, flags.sentinel_username, flags.sentinel_password, var("URL"));
    }
    return true;
  }

  // One Redis: kind, addresses (or sentinels), credentials, TLS, pool size.
  void Redis(const RedisFlags& flags) {
    const std::string prefix(flags.variable_prefix);
    auto var = [&prefix](absl::string_view name) { return absl::StrCat(prefix, name); };
    const std::optional<bool> tls = Bool(var("TLS"));
    const std::string type = absl::AsciiStrToLower(Get(var("TYPE")).value_or("single"));
    const bool cluster = type == "cluster";
    const bool sentinel = type == "sentinel";
    if (!cluster && !sentinel && type != "single") {
      Fail(absl::StrCat(var("TYPE"), "=", *Get(var("TYPE")), ": not single, cluster or sentinel"));
      return;
    }
    // The variables that chose a Redis: its TYPE when set; otherwise what called for it
    // (BACKEND_TYPE or REDIS_URL for the main one, REDIS_PERSECOND for the per-second one),
    // with upstream's default type.
    std::string chosen_by = var("TYPE");
    if (!IsSet(var("TYPE"))) {
      chosen_by = flags.variable_prefix == kMainRedis.variable_prefix
                      ? SetNames({"BACKEND_TYPE", "REDIS_URL"})
                      : std::string("REDIS_PERSECOND");
      absl::StrAppend(&chosen_by, " (", var("TYPE"), " unset: single)");
    }
    // Sentinel serves one standalone master.
    Set(flags.backend, cluster ? "redis_cluster" : "redis", chosen_by);

    // The master's (or the server's, or every cluster node's) credentials, with any sentinel.
    std::optional<std::string> auth = Get(var("AUTH"));
    UrlSchemes schemes;
    if (sentinel ? !SentinelAddresses(flags, schemes)
                 : !ServerAddresses(flags, cluster, auth, schemes)) {
      return;
    }
    if (!sentinel && IsSet(var("SENTINEL_AUTH"))) {
      Warn(absl::StrCat(var("SENTINEL_AUTH"), ": no effect; ", var("TYPE"),
                        " is not sentinel (as upstream)"));
    }
    if (schemes.tls && schemes.plain) {
      Fail(absl::StrCat(var("URL"), ": rediss:// and redis:// in one list; a Redis is reached "
                                    "over TLS (rediss://) or not (redis://), all its nodes alike"));
      return;
    }
    if (schemes.tls && tls.has_value() && !*tls) {
      Fail(absl::StrCat(var("URL"), ": rediss:// asks for TLS, but ", var("TLS"), "=false"));
      return;
    }
    if (schemes.tls || tls.has_value()) {
      const bool on = schemes.tls || *tls;
      std::string source = var("TLS");
      if (schemes.tls) {
        source = IsSet(var("TLS")) ? absl::StrCat(var("TLS"), ", ", var("URL"))
                                   : absl::StrCat(var("URL"), " (rediss://)");
      }
      Set(flags.tls, on ? "true" : "false", source);
      tls_on_ = tls_on_ || on;
    }
    if (auth.has_value()) {
      Credentials(*auth, flags.username, flags.password, var("AUTH"));
    }
    if (std::optional<int64_t> pool = Int(var("POOL_SIZE"), 1, 1024)) {
      Set(flags.connections, absl::StrCat(*pool), var("POOL_SIZE"));
    }
    std::vector<std::string> tuning;
    for (absl::string_view name : kRedisTuning) {
      if (IsSet(var(name))) {
        tuning.push_back(var(name));
      }
    }
    if (!tuning.empty()) {
      Warn(absl::StrCat(absl::StrJoin(tuning, ", "),
                        ": no effect; Sluice always pipelines, never waits for a pooled "
                        "connection, and reports the connection at /readyz"));
    }
    if (IsSet(var("TIMEOUT"))) {
      Warn(absl::StrCat(var("TIMEOUT"), ": not mapped; upstream's is a connection I/O timeout "
                                        "(default 10s), Sluice's per-decision budget is "
                                        "--redis_timeout (default 10ms)"));
    }
  }

  // The TLS files and switch both Redis share: mapped when either Redis has TLS on, as upstream
  // reads them only then; otherwise set for nothing, which a warning says.
  void RedisTls() {
    const std::optional<bool> skip_hostname = Bool(kRedisTlsSkipHostname);
    if (!tls_on_) {
      std::vector<absl::string_view> unused;
      for (const auto& [variable, flag] : kRedisTlsFiles) {
        if (IsSet(variable)) {
          unused.push_back(variable);
        }
      }
      if (skip_hostname.value_or(false)) {
        unused.push_back(kRedisTlsSkipHostname);
      }
      if (!unused.empty()) {
        Warn(absl::StrCat(absl::StrJoin(unused, ", "),
                          ": no effect; no Redis has TLS on (REDIS_TLS=true, or "
                          "REDIS_PERSECOND_TLS=true with REDIS_PERSECOND=true)"));
      }
      return;
    }
    for (const auto& [variable, flag] : kRedisTlsFiles) {
      if (std::optional<std::string> value = Get(variable)) {
        Set(flag, *value, std::string(variable));
      }
    }
    if (skip_hostname.has_value()) {
      Set("redis_tls_skip_hostname_verification", *skip_hostname ? "true" : "false",
          std::string(kRedisTlsSkipHostname));
    }
  }

  // BACKEND_TYPE=memcache: the servers (a list, or an SRV name looked up again on its
  // interval), the pool, TLS; upstream's empty key prefix when CACHE_KEY_PREFIX is unset, so
  // that keys are upstream's own (server/key/upstream_key.h). The REDIS_* variables are not
  // read, as upstream does not read them then. False when the servers are refused, and nothing
  // more is read.
  bool Memcache() {
    Set("backend", "memcached", "BACKEND_TYPE=memcache");
    const bool host_port = IsSet("MEMCACHE_HOST_PORT");
    const bool srv = IsSet("MEMCACHE_SRV");
    if (host_port && srv) {
      // Upstream panics: "Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set".
      Fail("MEMCACHE_HOST_PORT and MEMCACHE_SRV are both set; give one (as upstream)");
      return false;
    }
    if (!host_port && !srv) {
      Fail("BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT (host:port,...) or MEMCACHE_SRV "
           "(upstream starts without servers and fails every call)");
      return false;
    }
    if (host_port) {
      Set("memcached_servers", *Get("MEMCACHE_HOST_PORT"), "MEMCACHE_HOST_PORT");
    } else {
      Set("memcached_srv", *Get("MEMCACHE_SRV"), "MEMCACHE_SRV");
      if (std::optional<std::string> refresh = Get("MEMCACHE_SRV_REFRESH")) {
        Set("memcached_srv_refresh", *refresh, "MEMCACHE_SRV_REFRESH");
      }
    }
    if (host_port && IsSet("MEMCACHE_SRV_REFRESH")) {
      Warn("MEMCACHE_SRV_REFRESH: no effect without MEMCACHE_SRV (as upstream)");
    }
    if (std::optional<int64_t> idle = Int("MEMCACHE_MAX_IDLE_CONNS", 1, 1024)) {
      Set("memcached_connections", absl::StrCat(*idle), "MEMCACHE_MAX_IDLE_CONNS");
    }
    const std::optional<bool> tls = Bool("MEMCACHE_TLS");
    constexpr std::pair<absl::string_view, absl::string_view> kFiles[] = {
        {"MEMCACHE_TLS_CACERT", "memcached_tls_ca"},
        {"MEMCACHE_TLS_CLIENT_CERT", "memcached_tls_cert"},
        {"MEMCACHE_TLS_CLIENT_KEY", "memcached_tls_key"}};
    const std::optional<bool> skip = Bool("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION");
    if (tls.value_or(false)) {
      Set("memcached_tls", "true", "MEMCACHE_TLS");
      for (const auto& [variable, flag] : kFiles) {
        if (std::optional<std::string> value = Get(variable)) {
          Set(flag, *value, std::string(variable));
        }
      }
      if (skip.has_value()) {
        Set("memcached_tls_skip_hostname_verification", *skip ? "true" : "false",
            "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION");
      }
    } else {
      std::vector<absl::string_view> unused;
      for (const auto& [variable, flag] : kFiles) {
        if (IsSet(variable)) {
          unused.push_back(variable);
        }
      }
      if (skip.value_or(false)) {
        unused.push_back("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION");
      }
      if (!unused.empty()) {
        Warn(absl::StrCat(absl::StrJoin(unused, ", "),
                          ": no effect; MEMCACHE_TLS is not true (as upstream reads them)"));
      }
    }
    if (!IsSet("CACHE_KEY_PREFIX")) {
      Set("redis_key_prefix", "",
          "envoyproxy/ratelimit's default (CACHE_KEY_PREFIX unset: no prefix), so that "
          "memcached keys are upstream's");
    }
    return true;
  }

  // Upstream's keys for fixed windows on Redis (server/key/upstream_key.h), with its empty
  // prefix and its TTL jitter, so that a fleet moved over replica by replica on one Redis
  // counts each window in one counter.
  void RedisKeys() {
    redis_keys_ = true;
    Set("redis_key_layout", "upstream",
        "envoyproxy/ratelimit's default (its keys on Redis, which its replicas share)");
    if (!IsSet("CACHE_KEY_PREFIX")) {
      Set("redis_key_prefix", "",
          "envoyproxy/ratelimit's default (CACHE_KEY_PREFIX unset: no prefix), so that Redis "
          "keys are upstream's");
    }
    if (IsSet("EXPIRATION_JITTER_MAX_SECONDS")) {
      if (std::optional<int64_t> jitter =
              Int("EXPIRATION_JITTER_MAX_SECONDS", 0, int64_t{1} << 31)) {
        Set("redis_expiration_jitter", absl::StrCat(*jitter, "s"),
            "EXPIRATION_JITTER_MAX_SECONDS");
      }
    } else {
      Set("redis_expiration_jitter", "300s",
          "envoyproxy/ratelimit's default (EXPIRATION_JITTER_MAX_SECONDS unset: 300)");
    }
  }

  void Backend() {
    const std::optional<std::string> type = Get("BACKEND_TYPE");
    const std::string lower = absl::AsciiStrToLower(type.value_or("redis"));
    if (lower == "memcache") {
      if (!Memcache()) {
        return;
      }
    } else if (lower != "redis") {
      Fail(absl::StrCat("BACKEND_TYPE=", *type, ": not redis or memcache"));
      return;
    } else {
      if (type.has_value() || IsSet("REDIS_TYPE") || IsSet("REDIS_URL")) {
        Redis(kMainRedis);
        if (Bool("REDIS_PERSECOND").value_or(false)) {
          Redis(kPerSecondRedis);
        }
        RedisKeys();
      }
      RedisTls();
    }
    // The start-up wait (REDIS_STARTUP_*), for either backend.
    for (const auto& [name, flag] : kStartupWait) {
      if (std::optional<std::string> value = Get(name)) {
        Set(flag, *value, std::string(name));
      }
    }
  }

  // What upstream does by default that Sluice does only when told, for a deployment configured
  // by upstream's variables: its log level, its gRPC connection age, health that waits for
  // Redis at start, and its debug port (settings.go's defaults; server_impl.go's Start always
  // listens on DEBUG_HOST:DEBUG_PORT and only logs a failure to). Each is a flag assignment whose
  // source says it is upstream's default, so SLUICE_* and the command line still win.
  void UpstreamDefaults(bool upstream) {
    if (!upstream) {
      return;
    }
    for (const UpstreamDefault& d : kUpstreamDefaults) {
      if (!IsSet(d.variable)) {
        Set(d.flag, std::string(d.value),
            absl::StrCat("envoyproxy/ratelimit's default (", d.variable, " unset: ", d.upstream,
                         ")"));
      }
    }
    Set("wait_for_backend", "true",
        "envoyproxy/ratelimit's default (unhealthy until Redis first answers)");
    if (!IsSet("LOCAL_CACHE_SIZE_IN_BYTES")) {
      Set("over_limit_cache_keys", "0",
          "envoyproxy/ratelimit's default (LOCAL_CACHE_SIZE_IN_BYTES unset: no local cache)");
    }
    if (!IsSet("DEBUG_HOST") && !IsSet("DEBUG_PORT")) {
      Set("debug_address", "0.0.0.0:6070",
          "envoyproxy/ratelimit's default (DEBUG_HOST, DEBUG_PORT unset: 0.0.0.0, 6070)");
    }
    Set("debug_address_required", "false",
        "envoyproxy/ratelimit's default (a debug port it cannot listen on is only logged)");
  }

  // A deployment configured by upstream's variables gets upstream's charging on the algorithm
  // upstream has, the fixed window: every hit, admitted or not, when
  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is unset (false is mapped in Limiter). The algorithms
  // upstream does not have keep --default_charge: charged always, a flood above their rate would
  // keep a key in debt and admit nothing while it lasts.
  void UpstreamCharge(bool upstream) {
    if (upstream && !IsSet("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT")) {
      Set("default_charge_fixed_window", "always",
          "envoyproxy/ratelimit's default (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT unset)");
    }
  }

  void Limiter() {
    for (const auto& [variable, flag] : kBoolFlags) {
      if (std::optional<bool> value = Bool(variable)) {
        Set(flag, *value ? "true" : "false", std::string(variable));
      }
    }
    for (const auto& [variable, flag] : kStringFlags) {
      if (std::optional<std::string> value = Get(variable)) {
        Set(flag, *value, std::string(variable));
      }
    }
    // Upstream charges a denied request's hits unless told to stop (increment first); unset,
    // that is its default, applied in Run once any upstream variable was seen.
    // true also means what its users asked for (envoyproxy/ratelimit#427): a request one of
    // whose descriptors is over consumes nothing from the others.
    if (std::optional<bool> stop = Bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT")) {
      Set("default_charge_fixed_window", *stop ? "if_admitted" : "always",
          "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT");
      if (*stop) {
        Set("request_all_or_nothing", "true", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT");
      }
    }
    if (std::optional<int64_t> bytes =
            Int("LOCAL_CACHE_SIZE_IN_BYTES", 0, int64_t{1} << 50)) {
      Set("over_limit_cache_keys",
          absl::StrCat(*bytes == 0 ? 0 : std::max<int64_t>(1, *bytes / kBytesPerCachedKey)),
          "LOCAL_CACHE_SIZE_IN_BYTES");
      if (*bytes > 0) {
        // The bound that holds: the cache's heap, in whole MiB, rounded up.
        Set("over_limit_cache_max_mib", absl::StrCat((*bytes + (1 << 20) - 1) >> 20),
            "LOCAL_CACHE_SIZE_IN_BYTES");
      }
    }
    if (std::optional<std::string> ratio = Get("NEAR_LIMIT_RATIO")) {
      double value = 0;
      if (!absl::SimpleAtod(*ratio, &value) || !(value >= 0 && value <= 1)) {
        Fail(absl::StrCat("NEAR_LIMIT_RATIO=", *ratio, ": not a number from 0 to 1"));
      } else {
        Set("near_limit_ratio", *ratio, "NEAR_LIMIT_RATIO");
      }
    }
  }

  // USE_PROMETHEUS: upstream's metric names on their own listener, as its statsd_exporter sink
  // serves them.
  void Prometheus() {
    prometheus_ = Bool("USE_PROMETHEUS").value_or(false);
    if (prometheus_ && QuietBool("DISABLE_STATS").value_or(false)) {
      // runner.go's NewRunner: DISABLE_STATS comes first, and no sink at all is made.
      Warn("USE_PROMETHEUS=true: no effect with DISABLE_STATS=true, as upstream (nothing served "
           "on PROMETHEUS_ADDR)");
      prometheus_ = false;
      return;
    }
    if (!prometheus_) {
      std::vector<absl::string_view> unused;
      for (absl::string_view name : kPrometheusVariables) {
        if (IsSet(name)) {
          unused.push_back(name);
        }
      }
      if (!unused.empty()) {
        Warn(absl::StrCat(absl::StrJoin(unused, ", "), ": no effect without USE_PROMETHEUS=true"));
      }
      return;
    }
    // Upstream's default, and a Go address with an empty host: every interface.
    std::string address = Get("PROMETHEUS_ADDR").value_or(":9090");
    if (absl::StartsWith(address, ":")) {
      address = absl::StrCat("0.0.0.0", address);
    }
    Set("prometheus_address", address,
        IsSet("PROMETHEUS_ADDR") ? "USE_PROMETHEUS, PROMETHEUS_ADDR"
                                 : "USE_PROMETHEUS (PROMETHEUS_ADDR unset: :9090)");
    if (std::optional<std::string> path = Get("PROMETHEUS_PATH")) {
      Set("prometheus_path", *path, "PROMETHEUS_PATH");
    }
    if (std::optional<std::string> mapper = Get("PROMETHEUS_MAPPER_YAML")) {
      Set("prometheus_mapper", *mapper, "PROMETHEUS_MAPPER_YAML");
    }
    if (std::optional<bool> ms = Bool("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS")) {
      Set("prometheus_response_time_ms", *ms ? "true" : "false",
          "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS");
    }
  }

  // TRACING_ENABLED, and the other TRACING_* variables, which upstream reads only with it
  // (otherwise they are named in a warning). The service name is upstream's default when unset,
  // so that traces look as they did.
  void Tracing() {
    const std::optional<bool> enabled = Bool("TRACING_ENABLED");
    if (!enabled.value_or(false)) {
      if (enabled.has_value()) {
        Set("tracing", "false", "TRACING_ENABLED");
      }
      std::vector<absl::string_view> unused;
      for (absl::string_view name : kTracingVariables) {
        if (IsSet(name)) {
          unused.push_back(name);
        }
      }
      if (!unused.empty()) {
        Warn(absl::StrCat(absl::StrJoin(unused, ", "),
                          ": no effect without TRACING_ENABLED=true"));
      }
      return;
    }
    Set("tracing", "true", "TRACING_ENABLED");
    if (std::optional<std::string> name = Get("TRACING_SERVICE_NAME")) {
      Set("tracing_service_name", *name, "TRACING_SERVICE_NAME");
    } else {
      Set("tracing_service_name", "RateLimit",
          "TRACING_ENABLED (TRACING_SERVICE_NAME unset: RateLimit)");
    }
    if (std::optional<std::string> name = Get("TRACING_SERVICE_NAMESPACE")) {
      Set("tracing_service_namespace", *name, "TRACING_SERVICE_NAMESPACE");
    }
    if (std::optional<std::string> id = Get("TRACING_SERVICE_INSTANCE_ID")) {
      Set("tracing_service_instance_id", *id, "TRACING_SERVICE_INSTANCE_ID");
    }
    if (std::optional<std::string> protocol = Get("TRACING_EXPORTER_PROTOCOL")) {
      // Upstream compares exactly, and stops on anything else.
      if (*protocol == TracingProtocolName(TracingProtocol::kHttp) ||
          *protocol == TracingProtocolName(TracingProtocol::kGrpc)) {
        Set("tracing_protocol", *protocol, "TRACING_EXPORTER_PROTOCOL");
        tracing_protocol_ = *protocol == TracingProtocolName(TracingProtocol::kGrpc)
                                ? TracingProtocol::kGrpc
                                : TracingProtocol::kHttp;
        tracing_protocol_from_ = absl::StrCat("TRACING_EXPORTER_PROTOCOL=", *protocol);
      } else {
        Fail(absl::StrCat("TRACING_EXPORTER_PROTOCOL=", *protocol, ": not http or grpc"));
      }
    }
    if (std::optional<std::string> text = Get("TRACING_SAMPLING_RATE")) {
      double rate = 0;
      if (!absl::SimpleAtod(*text, &rate) || std::isnan(rate)) {
        Fail(absl::StrCat("TRACING_SAMPLING_RATE=", *text, ": not a number"));
      } else if (rate < 0 || rate > 1) {
        // Upstream's ratio sampler traces every call above 1 and none below 0.
        const std::string clamped = rate > 1 ? "1" : "0";
        Warn(absl::StrCat("TRACING_SAMPLING_RATE=", *text, ": taken as ", clamped,
                          ", as upstream's sampler takes it"));
        Set("tracing_sampling_rate", clamped, "TRACING_SAMPLING_RATE");
      } else {
        Set("tracing_sampling_rate", *text, "TRACING_SAMPLING_RATE");
      }
    }
  }

  // The name of the signal-specific variable `traces` if it is set, else of `all` if it is,
  // else "": the OpenTelemetry spec's precedence.
  absl::string_view OtelVariable(absl::string_view traces, absl::string_view all) {
    if (IsSet(traces)) {
      return traces;
    }
    return IsSet(all) ? all : absl::string_view();
  }

  // A whole number from 1 to INT32_MAX in `name`. The OpenTelemetry spec has an invalid value
  // ignored with a warning, not stop the start: so here (unset: nullopt, silently).
  std::optional<int64_t> OtelNumber(absl::string_view name, absl::string_view unit) {
    std::optional<std::string> text = Get(name);
    if (!text.has_value()) {
      return std::nullopt;
    }
    int64_t value = 0;
    if (!absl::SimpleAtoi(*text, &value) || value < 1 ||
        value > std::numeric_limits<int32_t>::max()) {
      Warn(absl::StrCat(name, "=", *text, ": not a whole number of ", unit, " from 1 to ",
                        std::numeric_limits<int32_t>::max(), "; ignored"));
      return std::nullopt;
    }
    return value;
  }

  // OTEL_EXPORTER_OTLP_[TRACES_]HEADERS ("name=value,...", values percent-encoded) as
  // --tracing_headers takes it: decoded and trimmed, as upstream's exporter reads them. An item
  // that cannot be read, or carried in the flag's list, is dropped with a warning that names the
  // header, never its value (it is often a key).
  std::string OtelHeaders(absl::string_view variable) {
    const std::string text = Get(variable).value_or("");
    std::vector<std::string> kept;
    for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
      const size_t eq = item.find('=');
      if (eq == absl::string_view::npos) {
        Warn(absl::StrCat(variable, ": an item is not name=value; ignored"));
        continue;
      }
      std::optional<std::string> name = PercentDecode(item.substr(0, eq));
      std::optional<std::string> value = PercentDecode(item.substr(eq + 1));
      if (!name.has_value() || !value.has_value()) {
        Warn(absl::StrCat(variable, ": header '", absl::StripAsciiWhitespace(item.substr(0, eq)),
                          "' is not percent-encoded (%XX); ignored"));
        continue;
      }
      const absl::string_view n = absl::StripAsciiWhitespace(*name);
      const absl::string_view v = absl::StripAsciiWhitespace(*value);
      bool sendable = !n.empty() && n.find_first_of("=,") == absl::string_view::npos &&
                      v.find(',') == absl::string_view::npos;
      for (char c : absl::StrCat(n, v)) {
        sendable = sendable && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
      }
      if (!sendable) {
        Warn(absl::StrCat(variable, ": header '", n,
                          "': an empty name, a control character, or a ',' (or '=' in the name) "
                          "once decoded; ignored"));
        continue;
      }
      kept.push_back(absl::StrCat(n, "=", v));
    }
    return absl::StrJoin(kept, ",");
  }

  // The standard OpenTelemetry exporter and batch processor variables (OTEL_EXPORTER_OTLP_*,
  // OTEL_BSP_*), which upstream's exporter reads. Read whenever set (see Run), each
  // signal-specific OTEL_EXPORTER_OTLP_TRACES_* winning over its OTEL_EXPORTER_OTLP_* twin. The
  // protocol is upstream's choice (TRACING_EXPORTER_PROTOCOL, read in Tracing), never
  // OTEL_EXPORTER_OTLP_PROTOCOL's, so the base endpoint takes OTLP/HTTP's path unless
  // TRACING_EXPORTER_PROTOCOL=grpc: a --tracing_protocol=grpc given elsewhere wants
  // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or --tracing_endpoint instead.
  void OpenTelemetry() {
    const absl::string_view in_force =
        tracing_protocol_ == TracingProtocol::kGrpc ? "grpc" : "http/protobuf";
    if (absl::string_view var = OtelVariable("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                                             "OTEL_EXPORTER_OTLP_PROTOCOL");
        !var.empty() && *Get(var) != in_force) {
      Warn(absl::StrCat(var, "=", *Get(var), ": not followed",
                        *Get(var) == "http/json" ? " (http/json is not supported)" : "",
                        "; as upstream, the protocol is chosen by ", tracing_protocol_from_,
                        " or --tracing_protocol"));
    }
    if (std::optional<std::string> traces = Get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
      Set("tracing_endpoint", *traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    } else if (std::optional<std::string> base = Get("OTEL_EXPORTER_OTLP_ENDPOINT")) {
      if (tracing_protocol_ == TracingProtocol::kGrpc) {
        Set("tracing_endpoint", *base, "OTEL_EXPORTER_OTLP_ENDPOINT");
      } else {
        absl::string_view root = *base;
        while (absl::ConsumeSuffix(&root, "/")) {
        }
        Set("tracing_endpoint", absl::StrCat(root, "/v1/traces"),
            "OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces, OTLP/HTTP)");
      }
    }
    if (absl::string_view var = OtelVariable("OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                                             "OTEL_EXPORTER_OTLP_HEADERS");
        !var.empty()) {
      Set("tracing_headers", OtelHeaders(var), std::string(var));
    }
    if (absl::string_view var = OtelVariable("OTEL_EXPORTER_OTLP_TRACES_INSECURE",
                                             "OTEL_EXPORTER_OTLP_INSECURE");
        !var.empty()) {
      const std::string value = absl::AsciiStrToLower(*Get(var));
      if (value == "true" || value == "false") {
        Set("tracing_insecure", value, std::string(var));
      } else {
        Warn(absl::StrCat(var, "=", *Get(var), ": not true or false; ignored"));
      }
    }
    if (absl::string_view var = OtelVariable("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                                             "OTEL_EXPORTER_OTLP_CERTIFICATE");
        !var.empty()) {
      Set("tracing_ca", *Get(var), std::string(var));
    }
    // The exporter's own timeout wins over the batch processor's.
    absl::string_view timeout =
        OtelVariable("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT");
    if (timeout.empty()) {
      timeout = IsSet("OTEL_BSP_EXPORT_TIMEOUT") ? "OTEL_BSP_EXPORT_TIMEOUT" : "";
    }
    if (!timeout.empty()) {
      if (std::optional<int64_t> ms = OtelNumber(timeout, "milliseconds")) {
        Set("tracing_timeout", absl::StrCat(*ms, "ms"), std::string(timeout));
      }
    }
    if (std::optional<int64_t> ms = OtelNumber("OTEL_BSP_SCHEDULE_DELAY", "milliseconds")) {
      Set("tracing_export_interval", absl::StrCat(*ms, "ms"), "OTEL_BSP_SCHEDULE_DELAY");
    }
    const TracingSettings defaults;
    const std::optional<int64_t> queue = OtelNumber("OTEL_BSP_MAX_QUEUE_SIZE", "spans");
    const std::optional<int64_t> batch = OtelNumber("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "spans");
    const int64_t queue_spans = queue.value_or(defaults.max_queue_spans);
    if (queue.has_value()) {
      Set("tracing_max_queue_spans", absl::StrCat(*queue), "OTEL_BSP_MAX_QUEUE_SIZE");
    }
    if (batch.value_or(defaults.max_export_spans) > queue_spans) {
      // The OpenTelemetry SDKs cut the batch to the queue rather than refuse it.
      Set("tracing_max_export_spans", absl::StrCat(queue_spans),
          batch.has_value() ? absl::StrCat("OTEL_BSP_MAX_EXPORT_BATCH_SIZE (cut to the queue, ",
                                           queue_spans, ")")
                            : std::string("OTEL_BSP_MAX_QUEUE_SIZE (the batch is cut to it)"));
    } else if (batch.has_value()) {
      Set("tracing_max_export_spans", absl::StrCat(*batch), "OTEL_BSP_MAX_EXPORT_BATCH_SIZE");
    }
    if (absl::string_view var = OtelVariable("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
                                             "OTEL_EXPORTER_OTLP_COMPRESSION");
        !var.empty() && *Get(var) != "none") {
      Warn(absl::StrCat(var, "=", *Get(var), ": not supported; spans are sent uncompressed"));
    }
    std::vector<absl::string_view> client_tls;
    for (absl::string_view name : kOtelClientTls) {
      if (IsSet(name)) {
        client_tls.push_back(name);
      }
    }
    if (!client_tls.empty()) {
      Warn(absl::StrCat(absl::StrJoin(client_tls, ", "),
                        ": no effect; Sluice's exporter presents no client certificate"));
    }
    std::vector<absl::string_view> ignored;
    for (absl::string_view name : kOtelIgnored) {
      if (IsSet(name)) {
        ignored.push_back(name);
      }
    }
    if (!ignored.empty()) {
      Warn(absl::StrCat(absl::StrJoin(ignored, ", "),
                        ": no effect, as under upstream, which sets its own sampler and "
                        "resource: --tracing, --tracing_sampling_rate and --tracing_service_* "
                        "(TRACING_*) decide"));
    }
  }

  // Upstream's stats sinks, as its runner.go's NewRunner picks one: DISABLE_STATS (none), then
  // USE_DOG_STATSD, then USE_STATSD (true by default), then USE_PROMETHEUS. Upstream refuses two
  // at once (and so refuses USE_DOG_STATSD=true or USE_PROMETHEUS=true unless USE_STATSD=false is
  // set too); Sluice takes USE_STATSD unset beside either as false, serves Prometheus beside a
  // statsd sink both asked for explicitly (with a warning), and refuses only USE_DOG_STATSD=true
  // with USE_STATSD=true, two statsd sinks for one address. Without any sink upstream logs its
  // stats to stdout; Sluice does not (its /metrics has them).
  void Stats() {
    bool stats_set = false;
    for (absl::string_view name : kStatsVariables) {
      stats_set = stats_set || IsSet(name);
    }
    for (absl::string_view name : {"USE_STATSD", "USE_DOG_STATSD", "DISABLE_STATS"}) {
      stats_set = stats_set || IsSet(name);
    }
    // Any of upstream's variables (Run's test, with these), not the Datadog or OTEL_* ones.
    const bool upstream =
        stats_set || !out_.flags.empty() || !out_.warnings.empty() || !out_.errors.empty();
    if (!upstream) {
      return;
    }
    const std::optional<bool> disabled = Bool("DISABLE_STATS");
    const std::optional<bool> dog = Bool("USE_DOG_STATSD");
    const std::optional<bool> plain = Bool("USE_STATSD");
    std::vector<std::string> unused;
    auto collect_unused = [&](absl::Span<const absl::string_view> names) {
      for (absl::string_view name : names) {
        if (IsSet(name)) {
          unused.emplace_back(name);
        }
      }
    };
    if (disabled.value_or(false)) {
      if (plain.value_or(false)) {
        unused.emplace_back("USE_STATSD=true");
      }
      if (dog.value_or(false)) {
        unused.emplace_back("USE_DOG_STATSD=true");
      }
      collect_unused(kStatsVariables);
      if (!unused.empty()) {
        Warn(absl::StrCat(absl::StrJoin(unused, ", "),
                          ": no effect with DISABLE_STATS=true, as upstream"));
      }
      return;
    }
    if (dog.value_or(false) && plain.value_or(false)) {
      Fail("USE_DOG_STATSD=true with USE_STATSD=true: two statsd sinks, which upstream refuses "
           "too (\"Set one of USE_DOG_STATSD, USE_STATSD, USE_PROMETHEUS\"); set USE_STATSD=false");
      return;
    }
    if (!dog.value_or(false) && !plain.value_or(!prometheus_)) {
      collect_unused(kStatsVariables);
      if (!unused.empty()) {
        Warn(absl::StrCat(absl::StrJoin(unused, ", "), ": no effect without a statsd sink (",
                          plain.has_value() ? "USE_STATSD=false"
                                            : "USE_STATSD unset with USE_PROMETHEUS=true, which "
                                              "upstream refuses; Sluice serves Prometheus only",
                          ")"));
      }
      return;
    }
    if (prometheus_) {
      Warn(absl::StrCat(dog.value_or(false) ? "USE_DOG_STATSD=true" : "USE_STATSD=true",
                        " with USE_PROMETHEUS=true: upstream refuses two stats sinks; Sluice "
                        "serves both"));
    }
    const std::string source = dog.value_or(false) ? "USE_DOG_STATSD"
                               : plain.has_value()  ? "USE_STATSD"
                                                    : "envoyproxy/ratelimit's default (USE_STATSD "
                                                      "unset: true)";
    std::optional<std::string> host = Get("STATSD_HOST");
    std::optional<int64_t> port = Int("STATSD_PORT", 1, 65535);
    std::string h = host.value_or("localhost");
    if (absl::StrContains(h, ':') && !absl::StartsWith(h, "[")) {
      h = absl::StrCat("[", h, "]");  // an IPv6 literal
    }
    const std::string where = SetNames({"STATSD_HOST", "STATSD_PORT"});
    Set("statsd_address", absl::StrCat(h, ":", port.value_or(8125)),
        where.empty() ? absl::StrCat(source, ", STATSD_HOST, STATSD_PORT unset: localhost:8125")
                      : absl::StrCat(source, ", ", where));
    if (dog.value_or(false)) {
      DogStatsd();
    } else {
      // gostats' net sink: STATSD_PROTOCOL, tcp by default ("udp4", "tcp6" and the like pick a
      // family there; here they pick the protocol).
      std::string protocol = "tcp";
      if (std::optional<std::string> given = Get("STATSD_PROTOCOL")) {
        const std::string lower = absl::AsciiStrToLower(*given);
        if (lower == "udp" || lower == "udp4" || lower == "udp6") {
          protocol = "udp";
        } else if (!(lower == "tcp" || lower == "tcp4" || lower == "tcp6")) {
          Fail(absl::StrCat("STATSD_PROTOCOL=", *given, ": not tcp or udp"));
        }
      }
      Set("statsd_protocol", protocol,
          IsSet("STATSD_PROTOCOL")
              ? "STATSD_PROTOCOL"
              : "envoyproxy/ratelimit's default (STATSD_PROTOCOL unset: tcp, as gostats dials)");
      collect_unused({"USE_DOG_STATSD_MOGRIFIERS"});
      if (!unused.empty()) {
        Warn("USE_DOG_STATSD_MOGRIFIERS: no effect without USE_DOG_STATSD=true, as upstream");
      }
    }
    if (std::optional<std::string> interval = Get("STATS_FLUSH_INTERVAL")) {
      absl::Duration d;
      if (!absl::ParseDuration(*interval, &d) || d <= absl::ZeroDuration() ||
          d == absl::InfiniteDuration()) {
        Fail(absl::StrCat("STATS_FLUSH_INTERVAL=", *interval,
                          ": not a positive duration (\"10s\", \"1m\", \"500ms\")"));
      } else {
        Set("statsd_flush_interval", absl::FormatDuration(d), "STATS_FLUSH_INTERVAL");
      }
    }
    if (std::optional<std::string> text = Get("EXTRA_TAGS")) {
      absl::StatusOr<std::vector<std::pair<std::string, std::string>>> tags =
          ParseEnvconfigMap(*text);
      if (!tags.ok()) {
        Fail(absl::StrCat("EXTRA_TAGS=", *text, ": ", tags.status().message(),
                          " (key:value,key2:value2)"));
      } else {
        std::vector<std::pair<std::string, std::string>> kept;
        for (auto& [key, value] : *tags) {
          if (key.empty() || value.empty()) {
            Warn(absl::StrCat("EXTRA_TAGS: '", key, ":", value,
                              "' has an empty key or value; dropped, as gostats drops it"));
          } else {
            kept.emplace_back(std::move(key), std::move(value));
          }
        }
        if (!kept.empty()) {
          Set("statsd_extra_tags", EnvconfigMapText(kept), "EXTRA_TAGS");
        }
      }
    }
  }

  // USE_DOG_STATSD: godogstats over datadog-go, to STATSD_HOST:STATSD_PORT over UDP, with the
  // mogrifiers USE_DOG_STATSD_MOGRIFIERS names and the DD_* global tags.
  void DogStatsd() {
    Set("statsd_dogstatsd", "true", "USE_DOG_STATSD");
    Set("statsd_protocol", "udp", "USE_DOG_STATSD (datadog-go sends over udp)");
    if (IsSet("STATSD_PROTOCOL")) {
      Warn("STATSD_PROTOCOL: no effect with USE_DOG_STATSD=true (upstream's Datadog client "
           "sends over udp)");
    }
    std::vector<std::string> tags;
    std::vector<absl::string_view> from;
    for (const auto& [variable, tag] : kDatadogEnvTags) {
      if (std::optional<std::string> value = Get(variable)) {
        tags.push_back(absl::StrCat(tag, ":", *value));
        from.push_back(variable);
      }
    }
    if (!tags.empty()) {
      Set("statsd_dogstatsd_tags", absl::StrJoin(tags, ","), absl::StrJoin(from, ", "));
    }
    std::optional<std::string> list = Get("USE_DOG_STATSD_MOGRIFIERS");
    if (!list.has_value() || absl::StripAsciiWhitespace(*list).empty()) {
      return;
    }
    // godogstats' newMogrifierMapFromEnv through kelseyhightower/envconfig v1.4.0: each name
    // (split at ',', not trimmed) reads DOG_STATSD_MOGRIFIER_<NAME>_PATTERN, _NAME and _TAGS,
    // the whole variable name upper-cased; one that is not set at all falls back to PATTERN,
    // NAME and TAGS (envconfig's alternative name), as upstream reads them.
    std::vector<StatsdMogrifierSettings> mogrifiers;
    std::vector<std::string> sources = {"USE_DOG_STATSD_MOGRIFIERS"};
    bool failed = false;
    for (absl::string_view id : absl::StrSplit(*list, ',')) {
      const std::string prefix =
          absl::AsciiStrToUpper(absl::StrCat("DOG_STATSD_MOGRIFIER_", id, "_"));
      auto read = [&](absl::string_view field) -> std::string {
        std::optional<std::string> value = env_(absl::StrCat(prefix, field));
        if (!value.has_value()) {
          value = env_(field);
        }
        return value.value_or("");
      };
      StatsdMogrifierSettings m;
      m.id = std::string(id);
      m.pattern = read("PATTERN");
      m.name = read("NAME");
      const std::string tags_text = read("TAGS");
      sources.push_back(absl::StrCat(prefix, "*"));
      absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
          ParseEnvconfigMap(tags_text);
      if (!pairs.ok()) {
        Fail(absl::StrCat(prefix, "TAGS=", tags_text, ": failed to load mogrifier ", id, ": ",
                          pairs.status().message()));
        failed = true;
        continue;
      }
      m.tags = std::move(*pairs);
      // In upstream's words (newMogrifierMapFromEnv), naming the variable.
      if (std::optional<StatsdMogrifierFault> fault = CheckStatsdMogrifier(m)) {
        failed = true;
        switch (fault->kind) {
          case StatsdMogrifierFault::kNoPattern:
            Fail(absl::StrCat(prefix, "PATTERN: no PATTERN specified for mogrifier ", id));
            break;
          case StatsdMogrifierFault::kPatternDoesNotCompile:
            Fail(absl::StrCat(prefix, "PATTERN=", m.pattern,
                              ": failed to compile pattern for mogrifier ", id, ": ",
                              fault->detail));
            break;
          case StatsdMogrifierFault::kNoName:
            Fail(absl::StrCat(prefix, "NAME: no NAME specified for mogrifier ", id));
            break;
          case StatsdMogrifierFault::kTagWithoutKey:
            Fail(absl::StrCat(prefix, "TAGS=", tags_text,
                              ": no key specified for a tag of mogrifier ", id));
            break;
          case StatsdMogrifierFault::kTagWithoutValue:
            Fail(absl::StrCat(prefix, "TAGS=", tags_text, ": no value specified for tag ",
                              fault->detail, " for mogrifier ", id));
            break;
        }
        continue;
      }
      mogrifiers.push_back(std::move(m));
    }
    if (!failed) {
      Set("statsd_mogrifiers", StatsdMogrifiersFlagText(mogrifiers), absl::StrJoin(sources, ", "));
    }
  }

  void NotHonoured() {
    const bool memcache =
        absl::AsciiStrToLower(Get("BACKEND_TYPE").value_or("")) == "memcache";
    if (!redis_keys_ && IsSet("EXPIRATION_JITTER_MAX_SECONDS")) {
      Warn(memcache ? "EXPIRATION_JITTER_MAX_SECONDS: no effect on memcached; Sluice's keys there "
                      "expire when their window ends, without jitter"
                    : "EXPIRATION_JITTER_MAX_SECONDS: no effect without a Redis (REDIS_URL)");
    }
    if (!memcache) {
      std::vector<absl::string_view> ignored;
      for (absl::string_view name :
           {"MEMCACHE_HOST_PORT", "MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH", "MEMCACHE_MAX_IDLE_CONNS",
            "MEMCACHE_TLS", "MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_CLIENT_CERT",
            "MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION"}) {
        if (IsSet(name)) {
          ignored.push_back(name);
        }
      }
      if (!ignored.empty()) {
        Warn(absl::StrCat(absl::StrJoin(ignored, ", "),
                          ": ignored (BACKEND_TYPE is not memcache)"));
      }
    }
  }

  const EnvLookup& env_;
  // RedisKeys ran: a Redis keeps upstream's keys, whose TTL has upstream's jitter.
  bool redis_keys_ = false;
  UpstreamTranslation out_;
  // Whether a Redis was given TLS (REDIS_TLS, REDIS_PERSECOND_TLS or a rediss:// URL).
  bool tls_on_ = false;
  // USE_PROMETHEUS=true in force (not cancelled by DISABLE_STATS=true).
  bool prometheus_ = false;
  // The OTLP protocol TRACING_EXPORTER_PROTOCOL chose (with TRACING_ENABLED=true), and which
  // variable said so, for the OTEL_* variables.
  TracingProtocol tracing_protocol_ = TracingProtocol::kHttp;
  std::string tracing_protocol_from_ = "TRACING_EXPORTER_PROTOCOL (unset: http)";
};

}  // namespace

UpstreamTranslation TranslateUpstreamEnvironment(const EnvLookup& env) {
  return Translator(env).Run();
}

std::string UpstreamAssignmentNote(const FlagAssignment& assignment,
                                   absl::string_view applied_value,
                                   absl::string_view final_value,
                                   absl::string_view overridden_by) {
  // Headers sent to a collector or a management server usually carry a key or a token.
  const bool secret = absl::StrContains(assignment.flag, "password") ||
                      assignment.flag == "tracing_headers" || assignment.flag == "xds_headers";
  auto shown = [secret](absl::string_view value) {
    return secret ? std::string("(hidden)") : std::string(value);
  };
  const std::string given = absl::StrCat("--", assignment.flag, "=", shown(applied_value));
  if (overridden_by.empty() && final_value == applied_value) {
    return absl::StrCat(given, " from ", assignment.source);
  }
  return absl::StrCat(assignment.source, ": ", given, " overridden by ",
                      overridden_by.empty() ? "a later setting" : overridden_by, " (--",
                      assignment.flag, "=", shown(final_value), " in force)");
}

bool CommandLineNamesFlag(const std::vector<std::string>& args, absl::string_view flag) {
  for (absl::string_view arg : args) {
    if (arg == "--") {
      return false;
    }
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      continue;
    }
    const absl::string_view name = arg.substr(0, arg.find('='));
    if (name == flag || (absl::StartsWith(name, "no") && name.substr(2) == flag)) {
      return true;
    }
  }
  return false;
}

}  // namespace sluice
