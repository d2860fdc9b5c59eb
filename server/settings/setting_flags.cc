#include "server/settings/setting_flags.h"

#include <set>
#include <type_traits>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/marshalling.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "absl/time/time.h"
#include "server/settings/statsd_mogrifiers_flag.h"

namespace sluice {
namespace {

// The field of Settings a path of member pointers leads to: Field<&Settings::http,
// &HttpSettings::address>(s) is s.http.address.
template <auto... kPath>
auto& Field(Settings& settings) {
  return (settings.*....*kPath);
}
template <auto... kPath>
using FieldType = std::remove_reference_t<decltype(Field<kPath...>(std::declval<Settings&>()))>;

// `text` parsed as a flag of type T named `name` would parse it, with abseil's message.
template <typename T>
bool Parse(absl::string_view name, absl::string_view text, T* value, std::string* error) {
  std::string why;
  if (absl::ParseFlag<T>(text, value, &why)) {
    return true;
  }
  *error = absl::StrCat("Illegal value '", text, "' specified for flag '", name, "'",
                        why.empty() ? "" : "; ", why);
  return false;
}

// One flag Settings reads.
struct Entry {
  absl::string_view name;
  // Parses `text` and stores the value in `settings`; false with a message in `*error`.
  bool (*read)(absl::string_view name, absl::string_view text, Settings& settings,
               std::string* error);
  bool (*normalize)(absl::string_view name, absl::string_view text, std::string* normalized,
                    std::string* error);
  bool (*has_type)(const absl::CommandLineFlag& flag);
};

template <typename T>
bool Normalize(absl::string_view name, absl::string_view text, std::string* normalized,
               std::string* error) {
  T value{};
  if (!Parse(name, text, &value, error)) {
    return false;
  }
  *normalized = absl::UnparseFlag<T>(value);
  return true;
}

template <typename T>
bool HasType(const absl::CommandLineFlag& flag) {
  return flag.IsOfType<T>();
}

template <auto... kPath>
bool ReadField(absl::string_view name, absl::string_view text, Settings& settings,
               std::string* error) {
  FieldType<kPath...> value{};
  if (!Parse(name, text, &value, error)) {
    return false;
  }
  Field<kPath...>(settings) = std::move(value);
  return true;
}

// A flag whose value is stored as it is.
template <auto... kPath>
constexpr Entry Plain(absl::string_view name) {
  using T = FieldType<kPath...>;
  return {name, &ReadField<kPath...>, &Normalize<T>, &HasType<T>};
}

// A flag of type T whose value kConvert interprets (a name for an enumerator, a list).
template <typename T>
using Converter = bool (*)(const T& value, Settings& settings, std::string* error);

template <typename T, Converter<T> kConvert>
bool ReadConverted(absl::string_view name, absl::string_view text, Settings& settings,
                   std::string* error) {
  T value{};
  return Parse(name, text, &value, error) && kConvert(value, settings, error);
}

template <typename T, Converter<T> kConvert>
constexpr Entry Converted(absl::string_view name) {
  return {name, &ReadConverted<T, kConvert>, &Normalize<T>, &HasType<T>};
}

// "a, b,,c": the parts between commas, blanks around each and empty parts dropped.
std::vector<std::string> CommaList(absl::string_view text) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    parts.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return parts;
}

// A flag whose value is a CommaList, stored in the field kPath leads to.
template <auto... kPath>
bool ReadCommaList(const std::string& text, Settings& settings, std::string*) {
  Field<kPath...>(settings) = CommaList(text);
  return true;
}

bool ReadLogLevel(const std::string& text, Settings& settings, std::string* error) {
  if (ParseLogLevel(text, &settings.log.level)) {
    return true;
  }
  *error = absl::StrCat("--log_level: '", text, "' is not debug, info, warning or error");
  return false;
}

bool ReadLogFormat(const std::string& text, Settings& settings, std::string* error) {
  if (ParseLogFormat(text, &settings.log.format)) {
    return true;
  }
  *error = absl::StrCat("--log_format: '", text, "' is not text or json");
  return false;
}

bool ReadBackend(const std::string& text, Settings& settings, std::string* error) {
  for (BackendKind kind : {BackendKind::kMemory, BackendKind::kRedis, BackendKind::kRedisCluster,
                           BackendKind::kMemcached}) {
    if (text == BackendKindName(kind)) {
      settings.backend.kind = kind;
      return true;
    }
  }
  *error = absl::StrCat("--backend: '", text,
                        "' is not memory, redis, redis_cluster or memcached");
  return false;
}

bool ReadPerSecondBackend(const std::string& text, Settings& settings, std::string* error) {
  std::optional<BackendKind>& kind = settings.backend.per_second_kind;
  if (text.empty()) {
    kind = std::nullopt;
  } else if (text == BackendKindName(BackendKind::kRedis)) {
    kind = BackendKind::kRedis;
  } else if (text == BackendKindName(BackendKind::kRedisCluster)) {
    kind = BackendKind::kRedisCluster;
  } else {
    *error = absl::StrCat("--redis_per_second_backend: '", text, "' is not redis or redis_cluster");
    return false;
  }
  return true;
}

bool ReadRedisClock(const std::string& text, Settings& settings, std::string* error) {
  for (RedisClockSource source : {RedisClockSource::kRedis, RedisClockSource::kLocal}) {
    if (text == RedisClockSourceName(source)) {
      settings.backend.shared.clock = source;
      return true;
    }
  }
  *error = absl::StrCat("--redis_clock: '", text, "' is not redis or local");
  return false;
}

bool ReadKeyLayout(const std::string& text, Settings& settings, std::string* error) {
  std::optional<KeyLayout> layout = ParseKeyLayout(text);
  if (!layout.has_value()) {
    *error = absl::StrCat("--redis_key_layout: '", text, "' is not sluice or upstream");
    return false;
  }
  settings.backend.shared.key_layout = *layout;
  return true;
}

bool ReadFailureMode(const std::string& text, Settings& settings, std::string* error) {
  std::optional<FailureMode> mode = ParseFailureMode(text);
  if (!mode.has_value()) {
    *error = absl::StrCat("--failure_mode: '", text, "' is not allow, deny or local");
    return false;
  }
  settings.limiter.failure_mode = *mode;
  return true;
}

bool ReadDefaultCharge(const std::string& text, Settings& settings, std::string* error) {
  if (std::optional<Charge> charge = ParseCharge(text)) {
    settings.limiter.default_charge = *charge;
    return true;
  }
  *error = absl::StrCat("--default_charge: '", text, "' is not if_admitted or always");
  return false;
}

bool ReadDefaultChargeFixedWindow(const std::string& text, Settings& settings,
                                  std::string* error) {
  if (text.empty()) {
    settings.limiter.default_charge_fixed_window.reset();  // --default_charge decides
    return true;
  }
  if (std::optional<Charge> charge = ParseCharge(text)) {
    settings.limiter.default_charge_fixed_window = *charge;
    return true;
  }
  *error = absl::StrCat("--default_charge_fixed_window: '", text,
                        "' is not if_admitted, always or empty");
  return false;
}

bool ReadRefuseRefunds(const std::string& text, Settings& settings, std::string* error) {
  std::vector<std::string> domains = CommaList(text);
  if (domains.size() > 1 && absl::c_linear_search(domains, "*")) {
    *error = "--refuse_refunds: '*' (every domain) goes alone";
    return false;
  }
  settings.limiter.refuse_refunds = std::move(domains);
  return true;
}

bool ReadConfigSource(const std::string& text, Settings& settings, std::string* error) {
  for (ConfigSourceKind source : {ConfigSourceKind::kFiles, ConfigSourceKind::kXds}) {
    if (text == ConfigSourceKindName(source)) {
      settings.config.source = source;
      return true;
    }
  }
  *error = absl::StrCat("--config_source: '", text, "' is not files or xds");
  return false;
}

// "key<sep>value,key2<sep>value2" into pairs, empty items skipped; an item without `sep` or
// with an empty key is an error naming the flag.
template <char kSep>
bool ReadPairs(absl::string_view flag, const std::string& text,
               std::vector<std::pair<std::string, std::string>>* pairs, std::string* error) {
  pairs->clear();
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits(kSep, 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    if (item.find(kSep) == absl::string_view::npos || key.empty()) {
      *error = absl::StrCat("--", flag, ": '", item, "' is not key", std::string(1, kSep),
                            "value");
      return false;
    }
    pairs->emplace_back(std::string(key), std::string(absl::StripAsciiWhitespace(kv.second)));
  }
  return true;
}

bool ReadXdsNodeMetadata(const std::string& text, Settings& settings, std::string* error) {
  return ReadPairs<'='>("xds_node_metadata", text, &settings.config.xds.node_metadata, error);
}

bool ReadXdsHeaders(const std::string& text, Settings& settings, std::string* error) {
  return ReadPairs<':'>("xds_headers", text, &settings.config.xds.headers, error);
}

bool ReadTracingProtocol(const std::string& text, Settings& settings, std::string* error) {
  for (TracingProtocol protocol : {TracingProtocol::kHttp, TracingProtocol::kGrpc}) {
    if (text == TracingProtocolName(protocol)) {
      settings.tracing.protocol = protocol;
      return true;
    }
  }
  *error = absl::StrCat("--tracing_protocol: '", text, "' is not http or grpc");
  return false;
}

bool ReadStatsdProtocol(const std::string& text, Settings& settings, std::string* error) {
  for (StatsdSettings::Protocol protocol :
       {StatsdSettings::Protocol::kUdp, StatsdSettings::Protocol::kTcp}) {
    if (text == StatsdProtocolName(protocol)) {
      settings.statsd.protocol = protocol;
      return true;
    }
  }
  *error = absl::StrCat("--statsd_protocol: '", text, "' is not udp or tcp");
  return false;
}

bool ReadStatsdExtraTags(const std::string& text, Settings& settings, std::string* error) {
  return ReadPairs<':'>("statsd_extra_tags", text, &settings.statsd.extra_tags, error);
}

bool ReadStatsdMogrifiers(const std::string& text, Settings& settings, std::string* error) {
  absl::StatusOr<std::vector<StatsdMogrifierSettings>> mogrifiers = ParseStatsdMogrifiers(text);
  if (!mogrifiers.ok()) {
    *error = absl::StrCat("--statsd_mogrifiers: ", mogrifiers.status().message());
    return false;
  }
  settings.statsd.mogrifiers = std::move(*mogrifiers);
  return true;
}

bool ReadTracingHeaders(const std::string& text, Settings& settings, std::string* error) {
  return ReadPairs<'='>("tracing_headers", text, &settings.tracing.headers, error);
}

// "HOST:PORT,HOST:PORT": the addresses of one Redis, empty parts dropped.
template <RedisTargetSettings BackendSettings::*kTarget>
bool ReadAddresses(const std::string& text, Settings& settings, std::string*) {
  (settings.backend.*kTarget).addresses = absl::StrSplit(text, ',', absl::SkipEmpty());
  return true;
}

using S = Settings;
using ConfigS = ConfigSettings;
using Xds = XdsSettings;
using Grpc = GrpcSettings;
using Http = HttpSettings;
using Prom = PrometheusSettings;
using Statsd = StatsdSettings;
using BackendS = BackendSettings;
using Target = RedisTargetSettings;
using Redis = RedisSettings;
using Limiter = LimiterSettings;
using Tracing = TracingSettings;
using Wait = BackendWaitSettings;
using Memcached = MemcachedSettings;

// Every flag, in server/main.cc's order.
constexpr Entry kFlags[] = {
    Plain<&S::config, &ConfigS::path>("config"),
    Plain<&S::config, &ConfigS::default_path>("default_config"),
    Plain<&S::grpc, &Grpc::address>("grpc_address"),
    Plain<&S::grpc, &Grpc::tls_cert>("tls_cert"),
    Plain<&S::grpc, &Grpc::tls_key>("tls_key"),
    Plain<&S::grpc, &Grpc::tls_client_ca>("tls_client_ca"),
    Plain<&S::grpc, &Grpc::tls_client_san>("tls_client_san"),
    Plain<&S::grpc, &Grpc::tls_reload_interval>("tls_reload_interval"),
    Plain<&S::grpc, &Grpc::rlqs>("rlqs"),
    Plain<&S::grpc, &Grpc::rlqs_rebalance_interval>("rlqs_rebalance_interval"),
    Plain<&S::grpc, &Grpc::rlqs_max_streams>("rlqs_max_streams"),
    Plain<&S::grpc, &Grpc::rlqs_max_buckets_per_stream>("rlqs_max_buckets_per_stream"),
    Plain<&S::grpc, &Grpc::rlqs_max_subscriptions>("rlqs_max_subscriptions"),
    Plain<&S::grpc, &Grpc::rlqs_max_streams_per_peer>("rlqs_max_streams_per_peer"),
    Plain<&S::grpc, &Grpc::rlqs_max_mib>("rlqs_max_mib"),
    Plain<&S::grpc, &Grpc::rlqs_max_peer_mib>("rlqs_max_peer_mib"),
    Plain<&S::grpc, &Grpc::rlqs_max_stream_mib>("rlqs_max_stream_mib"),
    Plain<&S::grpc, &Grpc::rlqs_max_pending_kib>("rlqs_max_pending_kib"),
    Plain<&S::grpc, &Grpc::rlqs_max_pending_mib>("rlqs_max_pending_mib"),
    Plain<&S::grpc, &Grpc::rlqs_write_timeout>("rlqs_write_timeout"),
    Plain<&S::grpc, &Grpc::rlqs_newcomer_waits>("rlqs_newcomer_waits"),
    Plain<&S::grpc, &Grpc::rlqs_page_values>("rlqs_page_values"),
    Plain<&S::grpc, &Grpc::max_connection_age>("grpc_max_connection_age"),
    Plain<&S::grpc, &Grpc::max_connection_age_grace>("grpc_max_connection_age_grace"),
    Plain<&S::http, &Http::address>("http_address"),
    Plain<&S::http, &Http::debug_address>("debug_address"),
    Plain<&S::http, &Http::debug_address_required>("debug_address_required"),
    Plain<&S::http, &Http::max_connections>("http_max_connections"),
    Plain<&S::http, &Http::request_timeout>("http_request_timeout"),
    Plain<&S::http, &Http::config_dump_max_bytes>("config_dump_max_bytes"),
    Plain<&S::http, &Http::answer_timeout>("http_answer_timeout"),
    Plain<&S::http, &Http::metrics_max_page_bytes>("metrics_max_page_bytes"),
    Plain<&S::prometheus, &Prom::address>("prometheus_address"),
    Plain<&S::prometheus, &Prom::path>("prometheus_path"),
    Plain<&S::prometheus, &Prom::mapper>("prometheus_mapper"),
    Plain<&S::prometheus, &Prom::response_time_ms>("prometheus_response_time_ms"),
    Plain<&S::statsd, &Statsd::address>("statsd_address"),
    Converted<std::string, &ReadStatsdProtocol>("statsd_protocol"),
    Plain<&S::statsd, &Statsd::dogstatsd>("statsd_dogstatsd"),
    Plain<&S::statsd, &Statsd::flush_interval>("statsd_flush_interval"),
    Converted<std::string, &ReadStatsdExtraTags>("statsd_extra_tags"),
    Converted<std::string, &ReadCommaList<&S::statsd, &Statsd::dogstatsd_tags>>(
        "statsd_dogstatsd_tags"),
    Converted<std::string, &ReadStatsdMogrifiers>("statsd_mogrifiers"),
    Converted<std::string, &ReadBackend>("backend"),
    Converted<std::string, &ReadAddresses<&BackendS::redis>>("redis_addresses"),
    Plain<&S::backend, &BackendS::redis, &Target::username>("redis_username"),
    Plain<&S::backend, &BackendS::redis, &Target::password>("redis_password"),
    Plain<&S::backend, &BackendS::redis, &Target::tls>("redis_tls"),
    Plain<&S::backend, &BackendS::shared, &Redis::tls_ca>("redis_tls_ca"),
    Plain<&S::backend, &BackendS::shared, &Redis::tls_cert>("redis_tls_cert"),
    Plain<&S::backend, &BackendS::shared, &Redis::tls_key>("redis_tls_key"),
    Plain<&S::backend, &BackendS::shared, &Redis::tls_server_name>("redis_tls_server_name"),
    Plain<&S::backend, &BackendS::shared, &Redis::tls_skip_hostname_verification>(
        "redis_tls_skip_hostname_verification"),
    Converted<std::string, &ReadCommaList<&S::backend, &BackendS::redis, &Target::sentinels>>(
        "redis_sentinels"),
    Plain<&S::backend, &BackendS::redis, &Target::sentinel_master>("redis_sentinel_master"),
    Plain<&S::backend, &BackendS::redis, &Target::sentinel_username>("redis_sentinel_username"),
    Plain<&S::backend, &BackendS::redis, &Target::sentinel_password>("redis_sentinel_password"),
    Plain<&S::backend, &BackendS::shared, &Redis::db>("redis_db"),
    Plain<&S::limiter, &Limiter::key_prefix>("redis_key_prefix"),
    Plain<&S::backend, &BackendS::shared, &Redis::timeout>("redis_timeout"),
    Plain<&S::backend, &BackendS::shared, &Redis::queue_grace>("redis_queue_grace"),
    Converted<std::string, &ReadRedisClock>("redis_clock"),
    Converted<std::string, &ReadKeyLayout>("redis_key_layout"),
    Plain<&S::backend, &BackendS::shared, &Redis::expiration_jitter>("redis_expiration_jitter"),
    Plain<&S::backend, &BackendS::shared, &Redis::io_threads>("redis_io_threads"),
    Plain<&S::backend, &BackendS::redis, &Target::connections>("redis_connections"),
    Plain<&S::backend, &BackendS::shared, &Redis::max_batch>("redis_max_batch"),
    Plain<&S::backend, &BackendS::shared, &Redis::lease_rate>("redis_lease_rate"),
    Plain<&S::backend, &BackendS::shared, &Redis::lease_window>("redis_lease_window"),
    Plain<&S::backend, &BackendS::shared, &Redis::lease_life>("redis_lease_life"),
    Plain<&S::backend, &BackendS::shared, &Redis::lease_max_share>("redis_lease_max_share"),
    Plain<&S::backend, &BackendS::shared, &Redis::caller_writes>("redis_caller_writes"),
    Plain<&S::limiter, &Limiter::max_rule_metric_series>("max_rule_metric_series"),
    Plain<&S::limiter, &Limiter::rule_metric_ttl>("rule_metric_ttl"),
    Plain<&S::backend, &BackendS::shared, &Redis::breaker_failures>("redis_breaker_failures"),
    Plain<&S::backend, &BackendS::shared, &Redis::breaker_open>("redis_breaker_open"),
    Plain<&S::backend, &BackendS::shared, &Redis::breaker_open_min>("redis_breaker_open_min"),
    Converted<std::string, &ReadPerSecondBackend>("redis_per_second_backend"),
    Converted<std::string, &ReadAddresses<&BackendS::per_second>>("redis_per_second_addresses"),
    Plain<&S::backend, &BackendS::per_second, &Target::username>("redis_per_second_username"),
    Plain<&S::backend, &BackendS::per_second, &Target::password>("redis_per_second_password"),
    Plain<&S::backend, &BackendS::per_second, &Target::tls>("redis_per_second_tls"),
    Converted<std::string,
              &ReadCommaList<&S::backend, &BackendS::per_second, &Target::sentinels>>(
        "redis_per_second_sentinels"),
    Plain<&S::backend, &BackendS::per_second, &Target::sentinel_master>(
        "redis_per_second_sentinel_master"),
    Plain<&S::backend, &BackendS::per_second, &Target::sentinel_username>(
        "redis_per_second_sentinel_username"),
    Plain<&S::backend, &BackendS::per_second, &Target::sentinel_password>(
        "redis_per_second_sentinel_password"),
    Plain<&S::backend, &BackendS::per_second, &Target::connections>("redis_per_second_connections"),
    Converted<std::string, &ReadCommaList<&S::backend, &BackendS::memcached, &Memcached::servers>>(
        "memcached_servers"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::srv>("memcached_srv"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::srv_refresh>("memcached_srv_refresh"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::connections>("memcached_connections"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::tls>("memcached_tls"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::tls_ca>("memcached_tls_ca"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::tls_cert>("memcached_tls_cert"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::tls_key>("memcached_tls_key"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::tls_server_name>(
        "memcached_tls_server_name"),
    Plain<&S::backend, &BackendS::memcached, &Memcached::tls_skip_hostname_verification>(
        "memcached_tls_skip_hostname_verification"),
    Plain<&S::limiter, &Limiter::over_limit_cache_keys>("over_limit_cache_keys"),
    Plain<&S::limiter, &Limiter::over_limit_cache_max_mib>("over_limit_cache_max_mib"),
    Converted<std::string, &ReadFailureMode>("failure_mode"),
    Plain<&S::limiter, &Limiter::replicas_hint>("replicas_hint"),
    Plain<&S::check_config>("check_config"),
    Converted<std::string, &ReadLogLevel>("log_level"),
    Converted<std::string, &ReadLogFormat>("log_format"),
    Plain<&S::config, &ConfigS::recursive>("config_recursive"),
    Plain<&S::config, &ConfigS::ignore_dot_files>("config_ignore_dot_files"),
    Plain<&S::config, &ConfigS::max_file_bytes>("config_max_file_bytes"),
    Plain<&S::config, &ConfigS::max_nodes>("config_max_nodes"),
    Plain<&S::config, &ConfigS::max_scalar_bytes>("config_max_scalar_bytes"),
    Plain<&S::config, &ConfigS::merge_domains>("merge_domain_config"),
    Plain<&S::config, &ConfigS::strict>("strict_config"),
    Plain<&S::config, &ConfigS::force_start_without_initial_config>(
        "force_start_without_initial_config"),
    Plain<&S::healthy_requires_config>("healthy_with_at_least_one_config_loaded"),
    Plain<&S::limiter, &Limiter::near_limit_ratio>("near_limit_ratio"),
    Plain<&S::limiter, &Limiter::shadow_mode>("shadow_mode"),
    Plain<&S::limiter, &Limiter::quota_mode>("quota_mode"),
    Plain<&S::limiter, &Limiter::response_dynamic_metadata>("response_dynamic_metadata"),
    Plain<&S::limiter, &Limiter::rate_limit_headers>("rate_limit_headers"),
    Plain<&S::limiter, &Limiter::limit_header>("rate_limit_limit_header"),
    Plain<&S::limiter, &Limiter::remaining_header>("rate_limit_remaining_header"),
    Plain<&S::limiter, &Limiter::reset_header>("rate_limit_reset_header"),
    Plain<&S::limiter, &Limiter::ietf_rate_limit_headers>("ietf_rate_limit_headers"),
    Plain<&S::limiter, &Limiter::retry_after_header>("retry_after_header"),
    Plain<&S::limiter, &Limiter::count_denied_hits>("count_denied_hits"),
    Converted<std::string, &ReadDefaultCharge>("default_charge"),
    Converted<std::string, &ReadDefaultChargeFixedWindow>("default_charge_fixed_window"),
    Converted<std::string, &ReadRefuseRefunds>("refuse_refunds"),
    Plain<&S::limiter, &Limiter::calendar_months>("calendar_months"),
    Plain<&S::limiter, &Limiter::request_all_or_nothing>("request_all_or_nothing"),
    Plain<&S::limiter, &Limiter::max_descriptors>("max_descriptors"),
    Plain<&S::limiter, &Limiter::max_entries>("max_entries"),
    Plain<&S::limiter, &Limiter::max_key_bytes>("max_key_bytes"),
    Plain<&S::backend, &BackendS::memory_max_keys>("memory_max_keys"),
    Plain<&S::backend, &BackendS::memory_max_mib>("memory_max_mib"),
    Plain<&S::config, &ConfigS::poll_interval>("config_poll_interval"),
    Plain<&S::config, &ConfigS::watch>("config_watch"),
    Plain<&S::shutdown_grace>("shutdown_grace"),
    Plain<&S::wait_for_backend, &Wait::enabled>("wait_for_backend"),
    Plain<&S::wait_for_backend, &Wait::initial_interval>("wait_for_backend_initial_interval"),
    Plain<&S::wait_for_backend, &Wait::max_interval>("wait_for_backend_max_interval"),
    Plain<&S::wait_for_backend, &Wait::max_elapsed>("wait_for_backend_max_elapsed"),
    Converted<std::string, &ReadConfigSource>("config_source"),
    Plain<&S::config, &ConfigS::xds, &Xds::server>("xds_server"),
    Plain<&S::config, &ConfigS::xds, &Xds::node_id>("xds_node_id"),
    Converted<std::string, &ReadXdsNodeMetadata>("xds_node_metadata"),
    Converted<std::string, &ReadXdsHeaders>("xds_headers"),
    Plain<&S::config, &ConfigS::xds, &Xds::tls>("xds_tls"),
    Plain<&S::config, &ConfigS::xds, &Xds::tls_ca>("xds_tls_ca"),
    Plain<&S::config, &ConfigS::xds, &Xds::tls_cert>("xds_tls_cert"),
    Plain<&S::config, &ConfigS::xds, &Xds::tls_key>("xds_tls_key"),
    Plain<&S::config, &ConfigS::xds, &Xds::tls_server_name>("xds_tls_server_name"),
    Plain<&S::config, &ConfigS::xds, &Xds::connect_retry_interval>("xds_connect_retry_interval"),
    Plain<&S::config, &ConfigS::xds, &Xds::backoff_initial>("xds_backoff_initial"),
    Plain<&S::config, &ConfigS::xds, &Xds::backoff_max>("xds_backoff_max"),
    Plain<&S::config, &ConfigS::xds, &Xds::backoff_random_factor>("xds_backoff_random_factor"),
    Plain<&S::config, &ConfigS::xds, &Xds::backoff_jitter>("xds_backoff_jitter"),
    Plain<&S::config, &ConfigS::xds, &Xds::max_message_bytes>("xds_max_message_bytes"),
    Plain<&S::tracing, &Tracing::enabled>("tracing"),
    Converted<std::string, &ReadTracingProtocol>("tracing_protocol"),
    Plain<&S::tracing, &Tracing::endpoint>("tracing_endpoint"),
    Plain<&S::tracing, &Tracing::insecure>("tracing_insecure"),
    Converted<std::string, &ReadTracingHeaders>("tracing_headers"),
    Plain<&S::tracing, &Tracing::ca>("tracing_ca"),
    Plain<&S::tracing, &Tracing::timeout>("tracing_timeout"),
    Plain<&S::tracing, &Tracing::sampling_rate>("tracing_sampling_rate"),
    Plain<&S::tracing, &Tracing::service_name>("tracing_service_name"),
    Plain<&S::tracing, &Tracing::service_namespace>("tracing_service_namespace"),
    Plain<&S::tracing, &Tracing::service_instance_id>("tracing_service_instance_id"),
    Plain<&S::tracing, &Tracing::descriptor_values>("tracing_descriptor_values"),
    Plain<&S::tracing, &Tracing::max_queue_spans>("tracing_max_queue_spans"),
    Plain<&S::tracing, &Tracing::max_export_spans>("tracing_max_export_spans"),
    Plain<&S::tracing, &Tracing::export_interval>("tracing_export_interval"),
    Plain<&S::admin, &AdminSettings::enabled>("admin_api"),
    Plain<&S::admin, &AdminSettings::token_file>("admin_token_file"),
};

const Entry* Find(absl::string_view name) {
  for (const Entry& entry : kFlags) {
    if (entry.name == name) {
      return &entry;
    }
  }
  return nullptr;
}

// " (--backend set by REDIS_TYPE)" for the flags of `names` an upstream variable set; "" if
// none did.
std::string UpstreamSuffix(const std::vector<std::string>& names, const FlagTexts& flags) {
  std::vector<std::string> parts;
  for (const std::string& name : names) {
    auto it = flags.find(name);
    if (it != flags.end() && it->second.source == FlagSource::kUpstream) {
      parts.push_back(absl::StrCat("--", name, " set by ", it->second.variables));
    }
  }
  return parts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(parts, "; "), ")");
}

// What ValidateSettings cannot tell from Settings alone, because a default is not a choice:
// Sentinel leaves --redis_addresses (default 127.0.0.1:6379) unused, so given beside the
// sentinels it names a server that would never be asked.
std::vector<SettingError> CheckGivenFlags(const Settings& settings, const FlagTexts& flags) {
  const BackendSettings& backend = settings.backend;
  struct Target {
    bool in_use;
    const RedisTargetSettings& target;
    absl::string_view addresses;
    absl::string_view sentinels;
  };
  const Target targets[] = {
      {backend.kind != BackendKind::kMemory, backend.redis, "redis_addresses", "redis_sentinels"},
      {backend.per_second_kind.has_value(), backend.per_second, "redis_per_second_addresses",
       "redis_per_second_sentinels"},
  };
  std::vector<SettingError> errors;
  for (const Target& t : targets) {
    if (t.in_use && !t.target.sentinels.empty() && flags.count(std::string(t.addresses)) > 0) {
      errors.push_back(SettingError{
          {std::string(t.addresses), std::string(t.sentinels)},
          absl::StrCat("--", t.addresses, " and --", t.sentinels,
                       " are exclusive: with Sentinel the sentinels name the master; give one "
                       "or the other")});
    }
  }
  return errors;
}

}  // namespace

SettingsOrErrors SettingsFromFlags(const FlagTexts& flags) {
  SettingsOrErrors out;
  std::set<std::string> unread;  // flags whose value could not be read
  for (const auto& [name, value] : flags) {
    if (Find(name) == nullptr) {
      out.errors.push_back(absl::StrCat("--", name, ": no setting reads this flag"));
    }
  }
  for (const Entry& entry : kFlags) {
    auto it = flags.find(std::string(entry.name));
    if (it == flags.end()) {
      continue;
    }
    std::string error;
    if (!entry.read(entry.name, it->second.text, out.settings, &error)) {
      out.errors.push_back(absl::StrCat(error, UpstreamSuffix({it->first}, flags)));
      unread.insert(it->first);
    }
  }
  std::vector<SettingError> invalid = ValidateSettings(out.settings);
  for (SettingError& error : CheckGivenFlags(out.settings, flags)) {
    invalid.push_back(std::move(error));
  }
  for (const SettingError& error : invalid) {
    bool about_unread = false;
    for (const std::string& flag : error.flags) {
      about_unread = about_unread || unread.count(flag) > 0;
    }
    if (!about_unread) {
      out.errors.push_back(absl::StrCat(error.message, UpstreamSuffix(error.flags, flags)));
    }
  }
  return out;
}

std::vector<std::string> SettingFlagNames() {
  std::vector<std::string> names;
  for (const Entry& entry : kFlags) {
    names.emplace_back(entry.name);
  }
  return names;
}

bool IsSettingFlag(absl::string_view flag) { return Find(flag) != nullptr; }

bool NormalizeFlagText(absl::string_view flag, absl::string_view text, std::string* normalized,
                       std::string* error) {
  const Entry* entry = Find(flag);
  return entry->normalize(entry->name, text, normalized, error);
}

bool HasSettingType(const absl::CommandLineFlag& defined) {
  return Find(defined.Name())->has_type(defined);
}

}  // namespace sluice
