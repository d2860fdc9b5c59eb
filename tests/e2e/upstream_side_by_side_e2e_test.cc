// Side by side with the real envoyproxy/ratelimit: its binary (built from upstream's commit
// b7792693, 2024-06) and build/bin/sluice are started the same way, with no flags and only
// upstream's environment variables, on the same config directory, and asked the same requests.
//
// - Differential*: each server has a redis-server of its own (the counters must not meet), and a
//   seeded random stream of requests goes to both in lockstep (request i to upstream, then
//   request i to Sluice). The answers are compared field by field; every difference is counted
//   under a stable "kind" (what differs, and the descriptor's situation: a rule, an override,
//   a counter upstream shares between limits...) with one example, the table is printed, and
//   the test fails on the kinds the allow-list below does not name. Every allow-list entry
//   cites the item of docs/migrating.md it relies on. Not compared: a pair whose two calls may
//   straddle a window boundary of a limit it met, one that Sluice's failure policy answered,
//   and until their window ends the counters such a pair left unequal.
// - MixedFleet*: one upstream and one Sluice replica on one Redis (standalone, then a Redis
//   Cluster), as a team mid-migration runs them: one window's limit holds across both.
//
// The upstream binary is not on CI machines: the tests skip without it. Its path is
// $SLUICE_UPSTREAM_RATELIMIT, by default /work/upstream-go/bin/ratelimit. Also read:
// SLUICE_SIDE_BY_SIDE_PAIRS (request pairs per variant, 5000), SLUICE_SIDE_BY_SIDE_SEED, and
// SLUICE_SIDE_BY_SIDE_TRACE (see TraceFilter).
//
// Kept out of what is sent: what upstream gained after 2024-06 (per-descriptor hits_addend,
// week/month/year units, share_threshold, value_to_metric, non-trailing wildcards, quota mode),
// so examples 9 to 11 of upstream's README are not served here; and a request whose key and
// value another split of `key_value` would match ("Keys and values are told apart").
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/rls_client.h"
#include "gtest/gtest.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using testing::ChildProcess;
using testing::FreePort;
using testing::RedisCluster;
using testing::RedisClusterOptions;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

using RlsDescriptor = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
using RlsStatus = RlsResponse::DescriptorStatus;

constexpr char kDefaultUpstreamBinary[] = "/work/upstream-go/bin/ratelimit";
constexpr uint32_t kUnlimitedRemaining = 4294967295u;

std::string UpstreamBinary() {
  const char* path = std::getenv("SLUICE_UPSTREAM_RATELIMIT");
  return path != nullptr && *path != '\0' ? path : kDefaultUpstreamBinary;
}

std::chrono::system_clock::time_point Now() { return std::chrono::system_clock::now(); }

int64_t UnixMillis(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// The window length in seconds of a unit (upstream's utils.UnitToDivider); 0 for the units
// upstream does not have. The response's and the override's enums number units alike.
int64_t PeriodSeconds(int unit) {
  switch (unit) {
    case RlsResponse::RateLimit::SECOND:
      return 1;
    case RlsResponse::RateLimit::MINUTE:
      return 60;
    case RlsResponse::RateLimit::HOUR:
      return 3600;
    case RlsResponse::RateLimit::DAY:
      return 86400;
    default:
      return 0;
  }
}

// ---------------------------------------------------------------------------------------------
// One server, started as an envoyproxy/ratelimit Deployment starts it.

class RlsProcess {
 public:
  // Starts `binary` with no arguments and upstream's variables: the config under
  // `runtime_root`/ratelimit/config, Redis at `redis_url` over TCP, every listener on
  // 127.0.0.1, plus `extra_env`. Waits until its gRPC health says SERVING for "ratelimit"
  // (upstream listens once Redis answers; Sluice listens at once and turns SERVING then).
  static absl::StatusOr<std::unique_ptr<RlsProcess>> Start(
      const std::string& label, const std::string& binary, const std::string& runtime_root,
      const std::string& redis_url, const std::vector<std::string>& extra_env,
      const std::string& log_dir) {
    auto server = std::unique_ptr<RlsProcess>(new RlsProcess());
    server->label_ = label;
    server->grpc_port_ = FreePort();
    server->http_port_ = FreePort();
    const int debug_port = FreePort();
    std::vector<std::string> env = {
        "USE_STATSD=false",
        "LOG_LEVEL=warn",
        "REDIS_SOCKET_TYPE=tcp",
        absl::StrCat("REDIS_URL=", redis_url),
        absl::StrCat("RUNTIME_ROOT=", runtime_root),
        "RUNTIME_SUBDIRECTORY=ratelimit",
        "RUNTIME_WATCH_ROOT=false",
        "HOST=127.0.0.1",
        absl::StrCat("PORT=", server->http_port_),
        "GRPC_HOST=127.0.0.1",
        absl::StrCat("GRPC_PORT=", server->grpc_port_),
        "DEBUG_HOST=127.0.0.1",
        absl::StrCat("DEBUG_PORT=", debug_port),
    };
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    server->process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{binary},
        absl::StrCat(log_dir, "/", label, "-", server->grpc_port_, ".log"), env);
    const std::string address = absl::StrCat("127.0.0.1:", server->grpc_port_);
    const auto deadline = Now() + std::chrono::seconds(30);
    while (!WaitForPort(server->grpc_port_, std::chrono::milliseconds(200))) {
      if (Now() > deadline || !server->process_->running()) {
        return absl::UnavailableError(
            absl::StrCat(label, " did not listen on ", address, ":\n", server->ReadLog()));
      }
    }
    while (testing::GrpcHealthCheck(address, "ratelimit") != std::string("\x08\x01", 2)) {
      if (Now() > deadline || !server->process_->running()) {
        return absl::UnavailableError(
            absl::StrCat(label, " did not turn SERVING on ", address, ":\n", server->ReadLog()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    server->client_ = std::make_unique<RlsClient>(address);
    return server;
  }

  absl::StatusOr<RlsResponse> Call(const RlsRequest& request) {
    return client_->ShouldRateLimit(request, absl::Seconds(10));
  }

  std::string ReadLog() const { return process_->ReadLog(); }
  const std::string& label() const { return label_; }
  // The Prometheus page on the HTTP port (Sluice's /metrics).
  std::string Metrics() const { return testing::HttpGet(http_port_, "/metrics"); }

 private:
  RlsProcess() = default;

  std::string label_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<RlsClient> client_;
};

// ---------------------------------------------------------------------------------------------
// The configs served, and the vocabulary requests are drawn from.

// Upstream's README examples that its commit b7792693 has (examples/envoyproxy-ratelimit/):
// 9 has non-trailing wildcards, 10 value_to_metric and 11 share_threshold, all newer.
constexpr const char* kUpstreamExamples[] = {"example1.yaml", "example2.yaml", "example3.yaml",
                                             "example4.yaml", "example5.yaml", "example6.yaml",
                                             "example7.yaml", "example8.yaml"};

// Nested descriptors, keys with no value (a default for any value) at every level, a level with
// no limit of its own, every unit upstream has, and a limit of 0 under a nested exact value.
constexpr char kNestedConfig[] = R"(domain: sbs_nested
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 6}
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 3}
        descriptors:
          - key: path
            value: /admin
            rate_limit: {unit: hour, requests_per_unit: 2}
          - key: path
            rate_limit: {unit: day, requests_per_unit: 5}
  - key: tenant
    value: big
    rate_limit: {unit: minute, requests_per_unit: 10}
    descriptors:
      - key: user
        value: root
        rate_limit: {unit: second, requests_per_unit: 0}
  - key: region
    descriptors:
      - key: zone
        value: z1
        rate_limit: {unit: hour, requests_per_unit: 4}
)";

// Trailing wildcards: two that overlap (upstream takes the first in file order), an exact value
// beside them, the key's default, a wildcard level with nested wildcard and default levels, and
// a '*' in a key (upstream matches it against key_value).
constexpr char kWildcardConfig[] = R"(domain: sbs_wild
descriptors:
  - key: path
    value: "/api/*"
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    value: "/api/v2/*"
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: path
    value: /api/exact
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 8}
  - key: client
    value: "bot*"
    descriptors:
      - key: op
        value: "get*"
        rate_limit: {unit: minute, requests_per_unit: 5}
      - key: op
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: "feature_*"
    rate_limit: {unit: minute, requests_per_unit: 6}
)";

// unlimited, shadow_mode (also on a limit of 0), limits of 0, replaces (by a limited and by an
// unlimited rule), detailed_metric.
constexpr char kModesConfig[] = R"(domain: sbs_modes
descriptors:
  - key: vip
    rate_limit: {unlimited: true}
  - key: vip
    value: capped
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: blocked
    value: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: group
    value: a
    rate_limit: {name: group_a, unit: minute, requests_per_unit: 3}
  - key: group
    value: b
    rate_limit:
      name: group_b
      unit: second
      requests_per_unit: 2
      replaces: [{name: group_a}]
  - key: group
    value: c
    rate_limit:
      unlimited: true
      replaces: [{name: group_b}]
  - key: user
    detailed_metric: true
    rate_limit: {unit: day, requests_per_unit: 4}
)";

// One level of a request descriptor: a key and the values to pick from (configured values,
// values a wildcard matches, and values nothing names).
struct Level {
  std::string key;
  std::vector<std::string> values;
};

// A domain and the descriptor shapes its config knows; a request uses a prefix of one shape.
struct DomainVocabulary {
  std::string domain;
  std::vector<std::vector<Level>> shapes;
};

const std::vector<DomainVocabulary>& Vocabulary() {
  static const auto* const kVocabulary = new std::vector<DomainVocabulary>{
      {"orders_db", {{{"table", {"orders", "default", "users"}}}}},
      {"notifications",
       {{{"channel", {"promo", "email"}}, {"recipient", {"r1", "r2", "r3"}}},
        {{"recipient", {"r1", "r2"}}}}},
      {"gateway_per_ip", {{{"client_ip", {"203.0.113.9", "10.0.0.1", "10.0.0.2"}}}}},
      {"depth", {{{"tier", {"gold", "silver"}}, {"region", {"eu", "us"}}}}},
      {"backoffice", {{{"sso", {"a", "b"}}}, {{"billing", {"a", "b"}}}}},
      {"soft_launch",
       {{{"app", {"web", "ios"}}, {"account", {"trial-1", "trial-2", "trial-3"}}}}},
      {"overrides",
       {{{"team", {"search", "ads"}}, {"user", {"ana", "bob"}}},
        {{"plan", {"premium", "free"}}, {"user", {"ana", "bob"}}}}},
      {"detailed", {{{"tenant", {"acme", "internal", "other"}}}}},
      {"sbs_nested",
       {{{"tenant", {"t1", "t2", "big"}},
         {"user", {"u1", "u2", "root"}},
         {"path", {"/admin", "/home"}}},
        {{"region", {"north", "south"}}, {"zone", {"z1", "z2"}}}}},
      {"sbs_wild",
       {{{"path", {"/api/a", "/api/b", "/api/v2/x", "/api/exact", "/api/", "/apix", "/web"}}},
        {{"client", {"bot1", "botnet", "human"}}, {"op", {"get", "getAll", "put"}}},
        {{"feature", {"on", "off"}}},
        {{"feature_x", {"1", "2"}}}}},
      {"sbs_modes",
       {{{"vip", {"gold", "capped"}}},
        {{"trial", {"t1", "t2"}}},
        {{"blocked", {"x", "shadow"}}},
        {{"group", {"a", "b", "c", "d"}}},
        {{"user", {"u1", "u2", "u3"}}}}},
  };
  return *kVocabulary;
}

// Lays out RUNTIME_ROOT/ratelimit/config under `root` with every config above.
void WriteConfigs(const TempDir& dir, const std::string& root) {
  for (const char* name : kUpstreamExamples) {
    std::ifstream in(
        absl::StrCat(testing::SourceDir(), "/examples/envoyproxy-ratelimit/config/", name));
    std::stringstream content;
    content << in.rdbuf();
    ASSERT_FALSE(content.str().empty()) << name;
    dir.WriteFile(absl::StrCat(root, "/ratelimit/config/", name), content.str());
  }
  dir.WriteFile(root + "/ratelimit/config/sbs_nested.yaml", kNestedConfig);
  dir.WriteFile(root + "/ratelimit/config/sbs_wild.yaml", kWildcardConfig);
  dir.WriteFile(root + "/ratelimit/config/sbs_modes.yaml", kModesConfig);
}

// ---------------------------------------------------------------------------------------------
// Seeded random requests.

class RequestGenerator {
 public:
  explicit RequestGenerator(uint32_t seed) : rng_(seed) {}

  // A request of 1 to 3 descriptors of one domain (now and then a domain nothing configures),
  // hits_addend 0 to 3, sometimes a limit override, sometimes a descriptor repeated.
  RlsRequest Next() {
    const auto& vocabulary = Vocabulary();
    const DomainVocabulary& domain =
        vocabulary[Uniform(0, static_cast<int>(vocabulary.size()) - 1)];
    RlsRequest request;
    request.set_domain(Chance(0.02) ? "sbs_no_such_domain" : domain.domain);
    const int count = Uniform(1, 3);
    for (int i = 0; i < count; ++i) {
      RlsDescriptor* descriptor = request.add_descriptors();
      if (i > 0 && Chance(0.12)) {
        // The same entries again: upstream then increments one key twice in one pipeline.
        *descriptor->mutable_entries() = request.descriptors(Uniform(0, i - 1)).entries();
      } else {
        FillEntries(domain, descriptor);
      }
      if (Chance(0.1)) {
        descriptor->mutable_limit()->set_requests_per_unit(Uniform(0, 5));
        descriptor->mutable_limit()->set_unit(Chance(0.5) ? envoy::type::v3::SECOND
                                                          : envoy::type::v3::MINUTE);
      }
    }
    const int hits = Uniform(0, 19);
    request.set_hits_addend(hits < 6 ? 0 : hits < 14 ? 1 : hits < 17 ? 2 : 3);
    return request;
  }

 private:
  void FillEntries(const DomainVocabulary& domain, RlsDescriptor* descriptor) {
    if (Chance(0.06)) {
      auto* entry = descriptor->add_entries();
      entry->set_key(absl::StrCat("unknown", Uniform(0, 2)));
      entry->set_value(absl::StrCat("v", Uniform(0, 3)));
      return;
    }
    const std::vector<Level>& shape =
        domain.shapes[Uniform(0, static_cast<int>(domain.shapes.size()) - 1)];
    const int depth = Uniform(1, static_cast<int>(shape.size()));
    for (int level = 0; level < depth; ++level) {
      auto* entry = descriptor->add_entries();
      entry->set_key(shape[level].key);
      if (Chance(0.01)) {
        entry->set_value("");
      } else if (Chance(0.08)) {
        entry->set_value(absl::StrCat("r", Uniform(0, 9)));
      } else {
        const auto& values = shape[level].values;
        entry->set_value(values[Uniform(0, static_cast<int>(values.size()) - 1)]);
      }
    }
    if (Chance(0.07)) {
      auto* entry = descriptor->add_entries();
      entry->set_key("extra");
      entry->set_value("e");
    }
  }

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  std::mt19937 rng_;
};

// ---------------------------------------------------------------------------------------------
// Printing.

std::string EntriesText(const RlsDescriptor& descriptor) {
  std::vector<std::string> parts;
  for (const auto& entry : descriptor.entries()) {
    parts.push_back(absl::StrCat(entry.key(), "=", entry.value()));
  }
  return absl::StrJoin(parts, ",");
}

std::string FormatRequest(const RlsRequest& request) {
  std::string out = absl::StrCat("domain=", request.domain());
  for (const RlsDescriptor& descriptor : request.descriptors()) {
    absl::StrAppend(&out, " [", EntriesText(descriptor));
    if (descriptor.has_limit()) {
      absl::StrAppend(&out, " limit=", descriptor.limit().requests_per_unit(), "/",
                      envoy::type::v3::RateLimitUnit_Name(descriptor.limit().unit()));
    }
    absl::StrAppend(&out, "]");
  }
  absl::StrAppend(&out, " hits_addend=", request.hits_addend());
  return out;
}

std::string FormatDuration(const google::protobuf::Duration& d) {
  if (d.nanos() == 0) {
    return absl::StrCat(d.seconds(), "s");
  }
  return absl::StrFormat("%.3fs", d.seconds() + d.nanos() / 1e9);
}

std::string FormatAnswer(const absl::StatusOr<RlsResponse>& answer) {
  if (!answer.ok()) {
    return absl::StrCat("gRPC error ", answer.status().ToString());
  }
  std::vector<std::string> statuses;
  for (const RlsStatus& status : answer->statuses()) {
    std::string s = RlsResponse::Code_Name(status.code());
    if (status.has_current_limit()) {
      absl::StrAppend(&s, " ", status.current_limit().requests_per_unit(), "/",
                      RlsResponse::RateLimit::Unit_Name(status.current_limit().unit()));
      if (!status.current_limit().name().empty()) {
        absl::StrAppend(&s, " name=", status.current_limit().name());
      }
    } else {
      absl::StrAppend(&s, " -");
    }
    absl::StrAppend(&s, " remaining=", status.limit_remaining());
    if (status.has_duration_until_reset()) {
      absl::StrAppend(&s, " reset=", FormatDuration(status.duration_until_reset()));
    }
    statuses.push_back(std::move(s));
  }
  std::string out = absl::StrCat(RlsResponse::Code_Name(answer->overall_code()), " {",
                                 absl::StrJoin(statuses, " | "), "}");
  if (answer->response_headers_to_add_size() > 0) {
    std::vector<std::string> headers;
    for (const auto& header : answer->response_headers_to_add()) {
      headers.push_back(absl::StrCat(header.key(), ": ", header.value()));
    }
    absl::StrAppend(&out, " headers{", absl::StrJoin(headers, ", "), "}");
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Differences and the allow-list.

enum class Variant { kDefault, kRateLimitHeaders, kStopIncrement };

// Appended to a kind, in the STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true variant, when a
// request that reached a limit (denied, or answered at or over it, in shadow_mode too) touched
// the descriptor's counter in this window, this request included: where upstream's charging and
// Sluice's part.
constexpr char kAfterDenial[] = ", after a denial";

// The kind of a pair Sluice's failure policy answered (Differential::Undecided).
constexpr char kUndecided[] =
    "sluice answered by its failure policy: Redis did not answer within --redis_timeout";

struct Allowance {
  // A kind is allowed when it starts with `prefix` and ends with `suffix`...
  std::string prefix;
  std::string suffix;
  // ... in this variant only, or in every variant...
  std::optional<Variant> variant;
  // The bullet of docs/migrating.md, "Differences from envoyproxy/ratelimit", it relies on.
  std::string bullet;
  // ... and contains this.
  std::string contains = "";
};

const std::vector<Allowance>& Allowances() {
  static const auto* const kAllowances = new std::vector<Allowance>{
      // docs/migrating.md: "`retry-after` on OVER_LIMIT." Sluice adds it to a denial; upstream
      // sends no header by default. (On an OK answer it is another kind, not allowed.)
      {"header only in sluice: retry-after", "", std::nullopt, "`retry-after` on OVER_LIMIT"},
      // docs/migrating.md: "`duration_until_reset` over the limit is when the same request can
      // succeed."
      {"duration_until_reset differs:", ", over limit", std::nullopt,
       "`duration_until_reset` over the limit"},
      // docs/migrating.md: "`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`: a denied request
      // consumes nothing." Sluice charges admitted hits only and gives back what the admitted
      // descriptors of a denied request took, where upstream still increments a key that goes
      // over (and a lone descriptor's always), and skips the other descriptors of a request one
      // of whose keys is over. Its counters then part from upstream's once a denial touched
      // them.
      {"limit_remaining differs:", kAfterDenial, Variant::kStopIncrement,
       "`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`: a denied request consumes nothing"},
      {"code differs:", kAfterDenial, Variant::kStopIncrement,
       "`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`: a denied request consumes nothing"},
      {"overall_code differs", kAfterDenial, Variant::kStopIncrement,
       "`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`: a denied request consumes nothing"},
      // docs/migrating.md: "A `limit` override of a domain the config does not know is
      // enforced." Upstream's GetLimit returns before it reads the override.
      {"", "", std::nullopt,
       "A `limit` override of a domain the config does not know is enforced",
       ", unknown domain"},
      // docs/migrating.md: "`current_limit.name` is the rule's `name`, as upstream has answered
      // since envoyproxy/ratelimit f17d88f": the binary here (b7792693) is the day before it.
      {"current_limit.name differs", "", std::nullopt, "`current_limit.name`"},
      // docs/migrating.md: "A limit of 0 ... counts nothing. That shows where another limit
      // counts in the same counter".
      {"", "", std::nullopt, "A limit of 0", ", counter shared with a limit of 0"},
      // What follows a status's own difference, which is judged by its own kind: the overall
      // code, and the headers that show a status.
      {"overall_code differs", "", std::nullopt,
       "(follows a status's code, whose own kind must be allowed)", ", as a status's code does"},
      {"header", " (statuses differ too)", std::nullopt,
       "(follows the statuses, whose own kinds must be allowed)"},
      // docs/migrating.md, the `REDIS_TIMEOUT` row of the variables table (not a bullet of the
      // Differences): "upstream's is an I/O timeout of 10 s; Sluice's per-decision budget is
      // --redis_timeout (10 ms)". On a loaded machine Redis sometimes takes longer, and Sluice's
      // failure policy answers instead (OK, remaining 0, no reset); such pairs are not compared.
      {kUndecided, "", std::nullopt,
       "REDIS_TIMEOUT | warning, not mapped: upstream's is an I/O timeout of 10 s; Sluice's "
       "per-decision budget is `--redis_timeout` (10 ms)"},
      // docs/migrating.md: "A bad request is `INVALID_ARGUMENT` naming the field (upstream:
      // `UNKNOWN`)".
      {"gRPC error codes differ (upstream UNKNOWN, sluice INVALID_ARGUMENT)", "", std::nullopt,
       "A bad request is `INVALID_ARGUMENT`"},
  };
  return *kAllowances;
}

const Allowance* FindAllowance(const std::string& kind, Variant variant) {
  for (const Allowance& allowance : Allowances()) {
    if (absl::StartsWith(kind, allowance.prefix) && absl::EndsWith(kind, allowance.suffix) &&
        absl::StrContains(kind, allowance.contains) &&
        (!allowance.variant.has_value() || *allowance.variant == variant)) {
      return &allowance;
    }
  }
  return nullptr;
}

class DifferenceTable {
 public:
  void Add(const std::string& kind, const std::string& example) {
    Entry& entry = entries_[kind];
    if (entry.count++ == 0) {
      entry.example = example;
    }
  }

  // Prints every kind with its count, whether the allow-list names it, and its example.
  void Print(const std::string& title, Variant variant) const {
    std::string out = absl::StrCat("\n==== ", title, ": ", entries_.size(),
                                   " kind(s) of difference\n");
    absl::StrAppend(&out, absl::StrFormat("%7s  %-9s  %s\n", "count", "allowed", "kind"));
    for (const auto& [kind, entry] : entries_) {
      const Allowance* allowance = FindAllowance(kind, variant);
      absl::StrAppend(&out, absl::StrFormat("%7d  %-9s  %s\n", entry.count,
                                            allowance != nullptr ? "yes" : "NO", kind));
      if (allowance != nullptr) {
        absl::StrAppend(&out, "                    docs/migrating.md: \"", allowance->bullet,
                        "\"\n");
      }
      absl::StrAppend(&out, entry.example);
    }
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }

  // Fails the running test, naming every kind the allow-list does not name (their examples are
  // in the table Print wrote).
  void ExpectAllAllowed(Variant variant) const {
    std::string undocumented;
    int kinds = 0;
    for (const auto& [kind, entry] : entries_) {
      if (FindAllowance(kind, variant) == nullptr) {
        ++kinds;
        absl::StrAppend(&undocumented, "\n  ", entry.count, " x ", kind);
      }
    }
    EXPECT_EQ(kinds, 0) << kinds
                        << " kind(s) of difference from envoyproxy/ratelimit that "
                           "docs/migrating.md does not list (examples in the table above):"
                        << undocumented;
  }

 private:
  struct Entry {
    int count = 0;
    std::string example;
  };
  std::map<std::string, Entry> entries_;
};

// ---------------------------------------------------------------------------------------------
// The comparison of one pair of answers.

// What the test remembers of the counters upstream keeps, named as upstream names them
// (limiter/cache_key.go, GenerateCacheKey): domain, entries and the window's start in seconds.
// Neither the limit nor its unit is in that name: a rule and an override of the same entries
// count in one counter, and so do two units' whose windows start on the same second.
class CounterMemory {
 public:
  static std::string Key(const std::string& domain, const RlsDescriptor& descriptor,
                         int64_t period, std::chrono::system_clock::time_point t) {
    return absl::StrCat(domain, "|", EntriesText(descriptor), "|", Window(t, period) * period);
  }
  static int64_t Window(std::chrono::system_clock::time_point t, int64_t period) {
    return UnixMillis(t) / 1000 / period;
  }

  void Mark(const std::string& key) { marks_.insert(key); }
  bool Marked(const std::string& key) const { return marks_.count(key) > 0; }

  // A limit that counts in a counter: "rule" or "override", requests per unit, period.
  using Source = std::tuple<std::string, uint32_t, int64_t>;

  // Records that `source` used the counter; returns every source that used it.
  const std::set<Source>& AddSource(const std::string& key, const Source& source) {
    std::set<Source>& sources = sources_[key];
    sources.insert(source);
    return sources;
  }

 private:
  std::set<std::string> marks_;
  std::map<std::string, std::set<Source>> sources_;
};

// Whole seconds as upstream answers them: a fraction counts as a whole second.
int64_t CeilSeconds(const google::protobuf::Duration& d) {
  return d.seconds() + (d.nanos() > 0 ? 1 : 0);
}

class Differential {
 public:
  // `mark_denials`: append kAfterDenial to the kinds it applies to.
  Differential(DifferenceTable* table, bool mark_denials)
      : table_(table), mark_denials_(mark_denials) {}

  // The window lengths (seconds) of the limits descriptor `i` met, on either side or in its
  // override.
  static std::set<int64_t> Periods(const RlsRequest& request, int i,
                                   const absl::StatusOr<RlsResponse>& up,
                                   const absl::StatusOr<RlsResponse>& sl) {
    std::set<int64_t> periods;
    for (const auto* answer : {&up, &sl}) {
      if (answer->ok() && (*answer)->statuses_size() > i &&
          (*answer)->statuses(i).has_current_limit()) {
        periods.insert(PeriodSeconds((*answer)->statuses(i).current_limit().unit()));
      }
    }
    if (request.descriptors(i).has_limit()) {
      periods.insert(PeriodSeconds(request.descriptors(i).limit().unit()));
    }
    periods.erase(0);
    return periods;
  }

  // Whether the pair sent between `t0` and `t1` may straddle a window boundary of a limit it
  // met (the two servers then counted in different windows). Such a pair is not compared, and
  // the counters it touched are not compared either until their window ends.
  bool Straddles(const RlsRequest& request, const absl::StatusOr<RlsResponse>& up,
                 const absl::StatusOr<RlsResponse>& sl, std::chrono::system_clock::time_point t0,
                 std::chrono::system_clock::time_point t1) {
    // Sluice reads Redis' clock, upstream its own: allow a few milliseconds between them.
    const auto before = t0 - std::chrono::milliseconds(5);
    const auto after = t1 + std::chrono::milliseconds(5);
    bool straddles = false;
    for (int i = 0; i < request.descriptors_size(); ++i) {
      for (int64_t period : Periods(request, i, up, sl)) {
        if (CounterMemory::Window(before, period) != CounterMemory::Window(after, period)) {
          straddles = true;
          tainted_.Mark(
              CounterMemory::Key(request.domain(), request.descriptors(i), period, after));
        }
      }
    }
    return straddles;
  }

  // Whether a counter the pair met was left unequal in this window by a pair that straddled a
  // boundary or that Sluice's failure policy answered.
  bool Tainted(const RlsRequest& request, const absl::StatusOr<RlsResponse>& up,
               const absl::StatusOr<RlsResponse>& sl, std::chrono::system_clock::time_point t0) {
    for (int i = 0; i < request.descriptors_size(); ++i) {
      for (int64_t period : Periods(request, i, up, sl)) {
        if (tainted_.Marked(
                CounterMemory::Key(request.domain(), request.descriptors(i), period, t0))) {
          return true;
        }
      }
    }
    return false;
  }

  // Whether Sluice's failure policy answered part of the request: a status with a limit and no
  // reset, when Redis did not answer within --redis_timeout (10 ms; upstream waits up to 10 s).
  // Nothing was decided or counted there, so the pair is not compared (its kind is recorded),
  // and the counters it met are not compared until their window ends.
  bool Undecided(const RlsRequest& request, const absl::StatusOr<RlsResponse>& up,
                 const absl::StatusOr<RlsResponse>& sl, std::chrono::system_clock::time_point t0) {
    if (!sl.ok()) {
      return false;
    }
    int undecided = 0;
    for (const RlsStatus& status : sl->statuses()) {
      if (status.has_current_limit() && !status.has_duration_until_reset()) {
        ++undecided;
      }
    }
    if (undecided == 0) {
      return false;
    }
    undecided_statuses_ += undecided;
    SetExample(request, up, sl);
    Note(kUndecided);
    for (int i = 0; i < request.descriptors_size(); ++i) {
      for (int64_t period : Periods(request, i, up, sl)) {
        tainted_.Mark(CounterMemory::Key(request.domain(), request.descriptors(i), period, t0));
      }
    }
    return true;
  }

  // Compares the answers field by field and records each difference in the table.
  void Compare(const RlsRequest& request, const absl::StatusOr<RlsResponse>& up,
               const absl::StatusOr<RlsResponse>& sl, std::chrono::system_clock::time_point t0) {
    SetExample(request, up, sl);
    if (!up.ok() || !sl.ok()) {
      if (up.ok()) {
        Note(absl::StrCat("gRPC error only from sluice (",
                          absl::StatusCodeToString(sl.status().code()), ")"));
      } else if (sl.ok()) {
        Note(absl::StrCat("gRPC error only from upstream (",
                          absl::StatusCodeToString(up.status().code()), ")"));
      } else if (up.status().code() != sl.status().code()) {
        Note(absl::StrCat("gRPC error codes differ (upstream ",
                          absl::StatusCodeToString(up.status().code()), ", sluice ",
                          absl::StatusCodeToString(sl.status().code()), ")"));
      }
      return;
    }
    // Upstream's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true leaves every key of a request
    // uncharged once one of them would go over, a shadow_mode one too.
    bool limit_reached = up->overall_code() == RlsResponse::OVER_LIMIT ||
                         sl->overall_code() == RlsResponse::OVER_LIMIT;
    for (int i = 0; i < request.descriptors_size(); ++i) {
      limit_reached = limit_reached || AtOrOverLimit(*up, i) || AtOrOverLimit(*sl, i);
    }
    // Qualifiers first (they read the memory of earlier pairs), then this pair's marks.
    std::vector<Situation> situations;
    std::vector<bool> after_denial;
    for (int i = 0; i < request.descriptors_size(); ++i) {
      if (up->statuses_size() > i && up->statuses(i).code() == RlsResponse::OVER_LIMIT) {
        ++over_limit_statuses_;
      }
      situations.push_back(Classify(request, i, *up, t0));
      after_denial.push_back(mark_denials_ &&
                             (limit_reached || DeniedBefore(request, i, up, sl, t0)));
    }
    for (int i = 0; i < request.descriptors_size(); ++i) {
      if (limit_reached) {
        for (int64_t period : Periods(request, i, up, sl)) {
          denials_.Mark(
              CounterMemory::Key(request.domain(), request.descriptors(i), period, t0));
        }
      }
    }
    const bool any_after_denial =
        std::find(after_denial.begin(), after_denial.end(), true) != after_denial.end();

    const int notes_before = notes_;
    if (up->overall_code() != sl->overall_code()) {
      bool status_code_differs = false;
      for (int i = 0; i < std::min(up->statuses_size(), sl->statuses_size()); ++i) {
        status_code_differs =
            status_code_differs || up->statuses(i).code() != sl->statuses(i).code();
      }
      Note(absl::StrCat("overall_code differs (upstream ",
                        RlsResponse::Code_Name(up->overall_code()), ", sluice ",
                        RlsResponse::Code_Name(sl->overall_code()), ")",
                        status_code_differs ? ", as a status's code does" : "",
                        KnownDomain(request.domain()) ? "" : ", unknown domain",
                        any_after_denial ? kAfterDenial : ""));
    }
    if (up->statuses_size() != sl->statuses_size()) {
      Note(absl::StrCat("number of statuses differs (upstream ", up->statuses_size(), ", sluice ",
                        sl->statuses_size(), ")"));
    }
    for (int i = 0; i < std::min(up->statuses_size(), sl->statuses_size()); ++i) {
      CompareStatus(up->statuses(i), sl->statuses(i), situations[i],
                    after_denial[i] ? kAfterDenial : "");
    }
    // Headers follow the statuses: a header that differs where a status does is named so.
    const std::string after_statuses = notes_ > notes_before ? " (statuses differ too)" : "";
    CompareHeaders(up->response_headers_to_add(), sl->response_headers_to_add(),
                   sl->overall_code(), "", after_statuses);
    CompareHeaders(up->request_headers_to_add(), sl->request_headers_to_add(), sl->overall_code(),
                   "request ", after_statuses);
    CompareRetryAfter(request, *sl);
    if (up->has_dynamic_metadata() != sl->has_dynamic_metadata()) {
      Note(absl::StrCat("dynamic_metadata only in ",
                        up->has_dynamic_metadata() ? "upstream" : "sluice"));
    }
    if (up->raw_body() != sl->raw_body()) {
      Note("raw_body differs");
    }
    if (up->has_quota() != sl->has_quota()) {
      Note(absl::StrCat("response quota only in ", up->has_quota() ? "upstream" : "sluice"));
    }
  }

  int over_limit_statuses() const { return over_limit_statuses_; }
  // Statuses Sluice's failure policy answered (a limit and no reset).
  int undecided_statuses() const { return undecided_statuses_; }

 private:
  // What a kind says of a descriptor: `limit` for every field (a rule, an override, none...,
  // and an unknown domain), `counter` added for the fields its counter decides (code,
  // limit_remaining): what else counted in it.
  struct Situation {
    std::string limit;
    std::string counter;
  };

  // A descriptor's situation, from the request and upstream's answer.
  Situation Classify(const RlsRequest& request, int i, const RlsResponse& up,
                     std::chrono::system_clock::time_point t0) {
    const RlsDescriptor& descriptor = request.descriptors(i);
    std::string category;
    std::string counter;
    std::optional<CounterMemory::Source> source;
    if (descriptor.has_limit()) {
      category = descriptor.limit().requests_per_unit() == 0 ? "override of 0" : "override";
      source = {"override", descriptor.limit().requests_per_unit(),
                PeriodSeconds(descriptor.limit().unit())};
    } else if (up.statuses_size() <= i) {
      category = "no status from upstream";
    } else if (!up.statuses(i).has_current_limit()) {
      category = up.statuses(i).limit_remaining() == kUnlimitedRemaining ? "unlimited" : "no rule";
    } else {
      const auto& limit = up.statuses(i).current_limit();
      category = limit.requests_per_unit() == 0 ? "limit 0" : "rule";
      source = {"rule", limit.requests_per_unit(), PeriodSeconds(limit.unit())};
    }
    if (!KnownDomain(request.domain())) {
      absl::StrAppend(&category, ", unknown domain");
    }
    for (int j = 0; j < request.descriptors_size(); ++j) {
      if (j != i && EntriesText(request.descriptors(j)) == EntriesText(descriptor)) {
        absl::StrAppend(&counter, ", same entries twice in the request");
        break;
      }
    }
    // What else counted in upstream's counter of this descriptor (CounterMemory), first: a
    // limit of 0 (upstream increments it as any other), a limit of another unit whose window
    // started on the same second, another limit.
    const int64_t period = source.has_value() ? std::get<2>(*source) : 0;
    if (period > 0) {
      const std::set<CounterMemory::Source>& sources =
          sources_.AddSource(CounterMemory::Key(request.domain(), descriptor, period, t0), *source);
      bool zero = false;
      bool other_unit = false;
      for (const CounterMemory::Source& other : sources) {
        zero = zero || (other != *source && std::get<1>(other) == 0);
        other_unit = other_unit || std::get<2>(other) != period;
      }
      if (zero) {
        absl::StrAppend(&counter, ", counter shared with a limit of 0");
      } else if (other_unit) {
        absl::StrAppend(&counter, ", counter shared with a limit of another unit");
      } else if (sources.size() > 1) {
        absl::StrAppend(&counter, ", counter shared with another limit");
      }
    }
    return {category, category + counter};
  }

  static bool KnownDomain(const std::string& domain) {
    const auto& vocabulary = Vocabulary();
    return std::any_of(vocabulary.begin(), vocabulary.end(),
                       [&](const DomainVocabulary& d) { return d.domain == domain; });
  }

  static bool AtOrOverLimit(const RlsResponse& response, int i) {
    if (response.statuses_size() <= i) {
      return false;
    }
    const RlsStatus& status = response.statuses(i);
    return status.code() == RlsResponse::OVER_LIMIT ||
           (status.has_current_limit() && status.limit_remaining() == 0);
  }

  bool DeniedBefore(const RlsRequest& request, int i, const absl::StatusOr<RlsResponse>& up,
                    const absl::StatusOr<RlsResponse>& sl,
                    std::chrono::system_clock::time_point t0) const {
    for (int64_t period : Periods(request, i, up, sl)) {
      if (denials_.Marked(
              CounterMemory::Key(request.domain(), request.descriptors(i), period, t0))) {
        return true;
      }
    }
    return false;
  }

  void CompareStatus(const RlsStatus& up, const RlsStatus& sl, const Situation& situation,
                     const std::string& qualifier) {
    if (up.code() != sl.code()) {
      Note(absl::StrCat("code differs: ", situation.counter, " (upstream ",
                        RlsResponse::Code_Name(up.code()), ", sluice ",
                        RlsResponse::Code_Name(sl.code()), ")", qualifier));
    }
    if (up.has_current_limit() != sl.has_current_limit()) {
      Note(absl::StrCat("current_limit only in ", up.has_current_limit() ? "upstream" : "sluice",
                        ": ", situation.limit));
    } else if (up.has_current_limit()) {
      if (up.current_limit().requests_per_unit() != sl.current_limit().requests_per_unit() ||
          up.current_limit().unit() != sl.current_limit().unit()) {
        Note(absl::StrCat("current_limit differs: ", situation.limit));
      }
      if (up.current_limit().name() != sl.current_limit().name()) {
        Note(absl::StrCat("current_limit.name differs: ", situation.limit));
      }
    }
    if (up.limit_remaining() != sl.limit_remaining()) {
      Note(absl::StrCat("limit_remaining differs: ", situation.counter, qualifier));
    }
    const std::string over =
        up.code() == RlsResponse::OVER_LIMIT || sl.code() == RlsResponse::OVER_LIMIT
            ? ", over limit"
            : "";
    if (up.has_duration_until_reset() != sl.has_duration_until_reset()) {
      Note(absl::StrCat("duration_until_reset only in ",
                        up.has_duration_until_reset() ? "upstream" : "sluice", ": ",
                        situation.limit, over));
    } else if (up.has_duration_until_reset()) {
      // Upstream answers whole seconds of its clock; one tick apart is the same answer.
      const int64_t difference = CeilSeconds(up.duration_until_reset()) -
                                 CeilSeconds(sl.duration_until_reset());
      if (difference > 1 || difference < -1) {
        Note(absl::StrCat("duration_until_reset differs: ", situation.limit, over));
      }
    }
    if (up.has_quota() != sl.has_quota()) {
      Note(absl::StrCat("quota only in ", up.has_quota() ? "upstream" : "sluice", ": ",
                        situation.limit));
    }
  }

  // Sluice's retry-after is "the exact wait in whole seconds" (docs/migrating.md): for fixed
  // windows, the end of the last window among its denied descriptors, their
  // duration_until_reset (upstream's too, where the statuses agree). Not checked where a denied
  // descriptor can never hold the request (a limit of 0, or below its hits): no window's end.
  void CompareRetryAfter(const RlsRequest& request, const RlsResponse& sl) {
    const uint32_t hits = std::max<uint32_t>(1, request.hits_addend());
    int64_t expected = -1;
    for (const RlsStatus& status : sl.statuses()) {
      if (status.code() != RlsResponse::OVER_LIMIT) {
        continue;
      }
      if (!status.has_current_limit() || status.current_limit().requests_per_unit() < hits) {
        return;
      }
      expected = std::max(expected, CeilSeconds(status.duration_until_reset()));
    }
    for (const auto& header : sl.response_headers_to_add()) {
      int64_t value = 0;
      if (expected >= 0 && absl::AsciiStrToLower(header.key()) == "retry-after" &&
          (!absl::SimpleAtoi(header.value(), &value) || value > expected + 1 ||
           value < expected - 1)) {
        Note("retry-after is not the reset of sluice's denied descriptors");
      }
    }
  }

  template <typename Headers>
  void CompareHeaders(const Headers& up, const Headers& sl, RlsResponse::Code sluice_code,
                      const std::string& which, const std::string& qualifier) {
    // Header names are case-insensitive; their spelling is compared on its own.
    std::map<std::string, std::pair<std::string, std::string>> up_headers, sl_headers;
    for (const auto& header : up) {
      if (!up_headers.emplace(absl::AsciiStrToLower(header.key()),
                              std::make_pair(header.key(), header.value()))
               .second) {
        Note(absl::StrCat(which, "header repeated by upstream: ", header.key()));
      }
    }
    for (const auto& header : sl) {
      if (!sl_headers.emplace(absl::AsciiStrToLower(header.key()),
                              std::make_pair(header.key(), header.value()))
               .second) {
        Note(absl::StrCat(which, "header repeated by sluice: ", header.key()));
      }
    }
    for (const auto& [name, up_header] : up_headers) {
      auto it = sl_headers.find(name);
      if (it == sl_headers.end()) {
        Note(absl::StrCat(which, "header only in upstream: ", up_header.first, qualifier));
        continue;
      }
      const auto& sl_header = it->second;
      if (up_header.first != sl_header.first) {
        Note(absl::StrCat(which, "header name spelled differently: upstream ", up_header.first,
                          ", sluice ", sl_header.first));
      }
      if (up_header.second == sl_header.second) {
        continue;
      }
      // A reset in whole seconds may be one tick apart, as duration_until_reset.
      int64_t up_value = 0;
      int64_t sl_value = 0;
      if (name == "ratelimit-reset" && absl::SimpleAtoi(up_header.second, &up_value) &&
          absl::SimpleAtoi(sl_header.second, &sl_value) && up_value - sl_value <= 1 &&
          sl_value - up_value <= 1) {
        continue;
      }
      Note(absl::StrCat(which, "header value differs: ", up_header.first, qualifier));
    }
    for (const auto& [name, sl_header] : sl_headers) {
      if (up_headers.count(name) > 0) {
        continue;
      }
      if (which.empty() && name == "retry-after" && sluice_code != RlsResponse::OVER_LIMIT) {
        Note("retry-after header on an answer that is not OVER_LIMIT");
      } else {
        Note(absl::StrCat(which, "header only in sluice: ", sl_header.first,
                          name == "retry-after" ? "" : qualifier));
      }
    }
  }

  void SetExample(const RlsRequest& request, const absl::StatusOr<RlsResponse>& up,
                  const absl::StatusOr<RlsResponse>& sl) {
    example_ = absl::StrCat("             request:  ", FormatRequest(request),
                            "\n             upstream: ", FormatAnswer(up),
                            "\n             sluice:   ", FormatAnswer(sl), "\n");
  }

  void Note(const std::string& kind) {
    ++notes_;
    table_->Add(kind, example_);
  }

  DifferenceTable* table_;
  const bool mark_denials_;
  std::string example_;
  CounterMemory tainted_;
  CounterMemory denials_;
  CounterMemory sources_;
  int over_limit_statuses_ = 0;
  int undecided_statuses_ = 0;
  int notes_ = 0;
};

// Waits, if needed, so that a pair sent now starts at least 5 ms after a second's start and
// has 25 ms before its end: every unit's window starts on a second.
void KeepAwayFromSecondBoundary() {
  const int64_t into_second = UnixMillis(Now()) % 1000;
  if (into_second > 975) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000 - into_second + 5));
  } else if (into_second < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5 - into_second));
  }
}

int PairsPerVariant() {
  const char* pairs = std::getenv("SLUICE_SIDE_BY_SIDE_PAIRS");
  int value = 0;
  if (pairs != nullptr && absl::SimpleAtoi(pairs, &value) && value > 0) {
    return value;
  }
  return 5000;
}

// SLUICE_SIDE_BY_SIDE_TRACE=<text>: every pair whose request contains <text> is printed, and
// at the end the keys of both Redis that contain it: to follow one counter's history.
std::string TraceFilter() {
  const char* filter = std::getenv("SLUICE_SIDE_BY_SIDE_TRACE");
  return filter != nullptr ? filter : "";
}

uint32_t SeedFor(Variant variant) {
  const char* seed = std::getenv("SLUICE_SIDE_BY_SIDE_SEED");
  uint32_t value = 0;
  if (seed != nullptr && absl::SimpleAtoi(seed, &value)) {
    return value + static_cast<uint32_t>(variant);
  }
  return 20240600u + static_cast<uint32_t>(variant);
}

class UpstreamSideBySideE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(UpstreamBinary().c_str(), X_OK) != 0) {
      GTEST_SKIP() << "the envoyproxy/ratelimit binary is not at " << UpstreamBinary()
                   << " (set SLUICE_UPSTREAM_RATELIMIT to its path): nothing to compare with";
    }
  }

  // Runs the differential comparison: `extra_env` added to both servers' environment.
  void RunDifferential(Variant variant, const std::string& title,
                       const std::vector<std::string>& extra_env) {
    const auto started = Now();
    WriteConfigs(dir_, "runtime");
    ASSERT_FALSE(HasFatalFailure());
    auto upstream_redis = RedisServer::Start();
    ASSERT_TRUE(upstream_redis.ok()) << upstream_redis.status();
    auto sluice_redis = RedisServer::Start();
    ASSERT_TRUE(sluice_redis.ok()) << sluice_redis.status();
    const std::string runtime_root = dir_.path() + "/runtime";
    auto upstream = RlsProcess::Start("upstream", UpstreamBinary(), runtime_root,
                                      (*upstream_redis)->address(), extra_env, dir_.path());
    ASSERT_TRUE(upstream.ok()) << upstream.status();
    auto sluice = RlsProcess::Start("sluice", SluiceServer::BinaryPath("sluice"), runtime_root,
                                    (*sluice_redis)->address(), extra_env, dir_.path());
    ASSERT_TRUE(sluice.ok()) << sluice.status();

    DifferenceTable table;
    Differential differential(&table, variant == Variant::kStopIncrement);
    RequestGenerator generator(SeedFor(variant));
    const int pairs = PairsPerVariant();
    int compared = 0;
    int straddled = 0;
    int tainted = 0;
    int undecided = 0;
    const std::string trace = TraceFilter();
    for (int i = 0; i < pairs; ++i) {
      const RlsRequest request = generator.Next();
      KeepAwayFromSecondBoundary();
      const auto t0 = Now();
      const absl::StatusOr<RlsResponse> up = (*upstream)->Call(request);
      const absl::StatusOr<RlsResponse> sl = (*sluice)->Call(request);
      const auto t1 = Now();
      if (!trace.empty() && absl::StrContains(FormatRequest(request), trace)) {
        std::printf("trace %d at %.3f: %s\n  upstream: %s\n  sluice:   %s\n", i,
                    UnixMillis(t0) / 1000.0, FormatRequest(request).c_str(),
                    FormatAnswer(up).c_str(), FormatAnswer(sl).c_str());
      }
      if (differential.Undecided(request, up, sl, t0)) {
        ++undecided;
        continue;
      }
      if (differential.Straddles(request, up, sl, t0, t1)) {
        ++straddled;
        continue;
      }
      if (differential.Tainted(request, up, sl, t0)) {
        ++tainted;
        continue;
      }
      differential.Compare(request, up, sl, t0);
      ++compared;
    }
    const double seconds = std::chrono::duration<double>(Now() - started).count();
    const double failure_policy_decisions = testing::MetricSum(
        (*sluice)->Metrics(), "sluice_failure_policy_decisions_total{");
    table.Print(absl::StrFormat("upstream side by side, %s: %d request pairs compared (%d sent; "
                                "not compared: %d answered by Sluice's failure policy, %d "
                                "straddled a window boundary, %d met a counter left unequal by "
                                "those), %d upstream OVER_LIMIT statuses, %.1f s",
                                title, compared, pairs, undecided, straddled, tainted,
                                differential.over_limit_statuses(), seconds),
                variant);
    // What the test takes for a failure policy's answer is what Sluice counts as one.
    EXPECT_EQ(failure_policy_decisions, differential.undecided_statuses());
    if (!trace.empty()) {
      for (auto* redis : {upstream_redis->get(), sluice_redis->get()}) {
        auto keys = redis->Command({"KEYS", absl::StrCat("*", trace, "*")});
        std::printf("keys with %s in %s's Redis:\n%s\n", trace.c_str(),
                    redis == upstream_redis->get() ? "upstream" : "sluice",
                    keys.ok() ? keys->c_str() : keys.status().ToString().c_str());
      }
    }
    table.ExpectAllAllowed(variant);
    // The stream must reach what it is meant to compare: most pairs, and many denials.
    EXPECT_GE(compared, pairs * 9 / 10);
    EXPECT_GE(differential.over_limit_statuses(), pairs / 20);
  }

  // Starts upstream and Sluice on one Redis at `redis_url` (`extra_env` for both), with a
  // 10/minute rule, and sends 20 requests alternating between them within one minute: one
  // window's limit holds for the fleet when both count in one counter.
  void ExpectMixedFleetHoldsOneLimit(const std::string& title, const std::string& redis_url,
                                     const std::vector<std::string>& extra_env,
                                     const std::function<std::string()>& dump_keys) {
    dir_.WriteFile("runtime/ratelimit/config/fleet.yaml", R"(domain: fleet
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 10}
)");
    const std::string runtime_root = dir_.path() + "/runtime";
    auto upstream = RlsProcess::Start("upstream", UpstreamBinary(), runtime_root, redis_url,
                                      extra_env, dir_.path());
    ASSERT_TRUE(upstream.ok()) << upstream.status();
    auto sluice = RlsProcess::Start("sluice", SluiceServer::BinaryPath("sluice"), runtime_root,
                                    redis_url, extra_env, dir_.path());
    ASSERT_TRUE(sluice.ok()) << sluice.status();
    auto request = BuildRequest("fleet", {"client=migrating"}, 0);
    ASSERT_TRUE(request.ok()) << request.status();
    // All 20 in one minute's window: 20 calls take well under a second, so start over in the
    // next minute only when less than 5 s of this one are left.
    const int64_t into_minute = UnixMillis(Now()) % 60000;
    if (into_minute > 55000) {
      std::this_thread::sleep_for(std::chrono::milliseconds(60000 - into_minute + 100));
    }
    const int64_t minute = UnixMillis(Now()) / 60000;
    int admitted[2] = {0, 0};
    std::string answers;
    for (int i = 0; i < 20; ++i) {
      RlsProcess& server = i % 2 == 0 ? **upstream : **sluice;
      const absl::StatusOr<RlsResponse> answer = server.Call(*request);
      ASSERT_TRUE(answer.ok()) << server.label() << ": " << answer.status();
      absl::StrAppend(&answers, "  ", i, " ", server.label(), ": ", FormatAnswer(answer), "\n");
      if (answer->overall_code() == RlsResponse::OK) {
        ++admitted[i % 2];
      }
    }
    ASSERT_EQ(UnixMillis(Now()) / 60000, minute) << "the 20 requests straddled a minute";
    const std::string report = absl::StrCat(
        "\n==== ", title, ": upstream admitted ", admitted[0], " of 10, sluice ", admitted[1],
        " of 10, ", admitted[0] + admitted[1], " in all (a shared limit admits 10)\n", answers,
        "  Redis keys:\n", dump_keys());
    std::fputs(report.c_str(), stdout);
    std::fflush(stdout);
    EXPECT_EQ(admitted[0] + admitted[1], 10) << report;
  }

  TempDir dir_;
};

// Verifies Sluice answers as upstream does under upstream's default environment (denied hits
// charged, no RateLimit-* headers): every field of every answer to a seeded random stream of
// requests, differences allowed only where docs/migrating.md lists them.
TEST_F(UpstreamSideBySideE2eTest, DifferentialDefault) {
  RunDifferential(Variant::kDefault, "default environment", {});
}

// Verifies the same with LIMIT_RESPONSE_HEADERS_ENABLED=true: upstream's RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset, taken from the same descriptor, with the same values.
TEST_F(UpstreamSideBySideE2eTest, DifferentialRateLimitHeaders) {
  RunDifferential(Variant::kRateLimitHeaders, "LIMIT_RESPONSE_HEADERS_ENABLED=true",
                  {"LIMIT_RESPONSE_HEADERS_ENABLED=true"});
}

// Verifies the same with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true, where the two charge
// denied hits differently (docs/migrating.md): counters may part only once a denial touched them.
TEST_F(UpstreamSideBySideE2eTest, DifferentialStopIncrementWhenOverLimit) {
  RunDifferential(Variant::kStopIncrement, "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true",
                  {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true"});
}

// Verifies a fleet mid-migration, upstream and Sluice replicas on one standalone Redis with
// upstream's variables (no CACHE_KEY_PREFIX), admits a 10/minute limit 10 times in all.
TEST_F(UpstreamSideBySideE2eTest, MixedFleetOneRedis) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  ExpectMixedFleetHoldsOneLimit("mixed fleet, one standalone Redis", (*redis)->address(), {},
                                [&] {
                                  auto keys = (*redis)->Command({"KEYS", "*"});
                                  return keys.ok() ? absl::StrCat("    ", *keys, "\n")
                                                   : keys.status().ToString();
                                });
}

// Verifies the same on a Redis Cluster (REDIS_TYPE=cluster, REDIS_URL listing the nodes).
TEST_F(UpstreamSideBySideE2eTest, MixedFleetOneRedisCluster) {
  RedisClusterOptions options;
  options.masters = 3;
  options.replicas_per_master = 0;
  auto cluster = RedisCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ExpectMixedFleetHoldsOneLimit(
      "mixed fleet, one Redis Cluster",
      absl::StrJoin((*cluster)->SeedAddresses(), ","),
      // Upstream refuses a cluster without implicit pipelining (it panics: "Implicit Pipelining
      // must be enabled to work with Redis Cluster Mode"); its README's value. Sluice warns.
      {"REDIS_TYPE=cluster", "REDIS_PIPELINE_WINDOW=150us"}, [&] {
        std::string out;
        for (const std::string& node : (*cluster)->SeedAddresses()) {
          auto keys = (*cluster)->Command(node, {"KEYS", "*"});
          absl::StrAppend(&out, "    ", node, ": ",
                          keys.ok() ? *keys : keys.status().ToString(), "\n");
        }
        return out;
      });
}

}  // namespace
}  // namespace sluice
