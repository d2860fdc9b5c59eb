// The answers and stats envoyproxy/ratelimit gives, as its README, config_impl.go, ratelimit.go
// and base_limiter.go specify them: share_threshold, value_to_metric, detailed_metric, quota
// mode, metadata, unlimited rules, near-limit accounting, the RateLimit-* headers, the global
// shadow and quota modes, and the switch to its increment-first counting.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "tests/support/fake_clock.h"
#include "server/config/config_loader.h"
#include "server/service/rate_limiter.h"
#include "tests/server/service/request_builder.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Response = RateLimiter::Response;
using Request = RateLimiter::Request;

constexpr char kConfig[] = R"(domain: up
descriptors:
  - key: files
    value: "docs/*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: files
    value: "img/*"
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value: "api/*"
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 3}
  - key: client
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: service
    value: "svc/*"
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {name: quota_service, owner: {team: a}}
  - key: quota2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {name: regular_service, owner: {team: b, on_call: x}}
  - key: internal
    rate_limit:
      unlimited: true
      replaces: [{name: per_user}]
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 1}
  - key: near
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: blocked
    rate_limit: {unit: hour}
)";

using testing::Entries;

class UpstreamCompatTest : public ::testing::Test {
 protected:
  UpstreamCompatTest() : store_(Load()), backend_(clock_) { Rebuild(RateLimiterOptions()); }

  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigText("up.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  void Rebuild(RateLimiterOptions options) {
    limiter_ = std::make_unique<RateLimiter>(store_, backend_, clock_, metrics_, options);
  }

  static Request MakeRequest(const std::vector<Entries>& descriptors, uint32_t hits = 0) {
    return testing::MakeRequest("up", descriptors, hits);
  }

  Response Decide(const Request& request) {
    absl::StatusOr<Response> response = testing::DecideInline(*limiter_, request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : Response();
  }

  Response Decide(const std::vector<Entries>& descriptors, uint32_t hits = 0) {
    return Decide(MakeRequest(descriptors, hits));
  }

  // The value of one sample of /metrics, e.g. Metric("sluice_rule_total_hits", "up.near").
  std::string Metric(absl::string_view name, absl::string_view key) {
    const std::string text = metrics_.Serialize();
    const std::string prefix = absl::StrCat(name, "{key=\"", key, "\"} ");
    size_t at = text.find(prefix);
    if (at == std::string::npos) {
      return "absent";
    }
    at += prefix.size();
    return text.substr(at, text.find('\n', at) - at);
  }

  static std::string Header(const Response& response, absl::string_view name) {
    for (const auto& header : response.response_headers_to_add()) {
      if (header.key() == name) {
        return header.value();
      }
    }
    return "absent";
  }

  FakeClock clock_{1700006400000000};  // on a minute boundary
  ConfigStore store_;
  MemoryBackend backend_;
  Metrics metrics_;
  std::unique_ptr<RateLimiter> limiter_;
};

// Verifies share_threshold: every value matching the wildcard counts against one counter and
// one stat key (the pattern), while a wildcard without it keeps a counter per value.
TEST_F(UpstreamCompatTest, ShareThresholdSharesOneCounter) {
  EXPECT_EQ(Decide({{{"files", "docs/a"}}}).overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"files", "docs/b"}}}).statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(Decide({{{"files", "docs/c"}}}).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.files_docs/*"), "3");

  EXPECT_EQ(Decide({{{"files", "img/a"}}}).overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"files", "img/a"}}}).overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"files", "img/b"}}}).overall_code(), Response::OK);  // its own counter
  EXPECT_EQ(Decide({{{"files", "img/a"}}}).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.files_img/*"), "4");
}

// Verifies a shared wildcard with a nested rule: the shared level counts once for every value
// it matches, the nested level by value; share_threshold names the level by its pattern even
// with value_to_metric.
TEST_F(UpstreamCompatTest, ShareThresholdComposesWithNestedDescriptors) {
  EXPECT_EQ(Decide({{{"route", "api/v1"}, {"method", "GET"}}}).overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"route", "api/v2"}, {"method", "GET"}}}).overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"route", "api/v3"}, {"method", "POST"}}}).overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"route", "api/v4"}, {"method", "GET"}}}).overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"route", "api/v5"}, {"method", "GET"}}}).overall_code(),
            Response::OVER_LIMIT);
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.route_api/*.method"), "5");
}

// Verifies value_to_metric puts the request's value into the stat key of a default match.
TEST_F(UpstreamCompatTest, ValueToMetricNamesTheValue) {
  Decide({{{"client", "abc"}}});
  Decide({{{"client", "xyz"}}});
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.client_abc"), "1");
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.client_xyz"), "1");
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.client"), "absent");
}

// Verifies detailed_metric under a shared wildcard: the shared level by its pattern, the
// others by the request's values.
TEST_F(UpstreamCompatTest, DetailedMetricKeepsSharedPattern) {
  Decide({{{"service", "svc/a"}, {"endpoint", "/x"}}});
  Decide({{{"service", "svc/b"}, {"endpoint", "/x"}}});
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.service_svc/*.endpoint_/x"), "2");
}

// Verifies quota mode: a quota descriptor over its limit says OVER_LIMIT in its status, but the
// request is OVER_LIMIT only when every quota descriptor is (or a regular one is).
TEST_F(UpstreamCompatTest, QuotaModeHoldsOnlyWhenEveryQuotaIsSpent) {
  Decide({{{"quota", "q"}}});
  Response spent = Decide({{{"quota", "q"}}, {{"quota2", "q"}}});
  EXPECT_EQ(spent.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(spent.statuses(1).code(), Response::OK);
  EXPECT_EQ(spent.overall_code(), Response::OK);  // quota2 still had room
  EXPECT_EQ(Header(spent, "retry-after"), "absent");

  Response both = Decide({{{"quota", "q"}}, {{"quota2", "q"}}});
  EXPECT_EQ(both.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(both.statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(both.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Header(both, "retry-after"), "60");

  // A regular descriptor within its limit does not rescue a spent quota...
  Response mixed = Decide({{{"regular", "r"}}, {{"quota", "q"}}});
  EXPECT_EQ(mixed.statuses(0).code(), Response::OK);
  EXPECT_EQ(mixed.overall_code(), Response::OVER_LIMIT);
  // ...and a regular descriptor over its limit holds the request whatever the quotas say.
  Response regular = Decide({{{"regular", "r"}}, {{"quota", "fresh"}}});
  EXPECT_EQ(regular.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(regular.statuses(1).code(), Response::OK);
  EXPECT_EQ(regular.overall_code(), Response::OVER_LIMIT);
}

// Verifies the global quota mode makes every descriptor a quota descriptor.
TEST_F(UpstreamCompatTest, GlobalQuotaMode) {
  RateLimiterOptions options;
  options.respond.global_quota_mode = true;
  Rebuild(options);
  Decide({{{"regular", "r"}}});
  Response r = Decide({{{"regular", "r"}}, {{"near", "n"}}});
  EXPECT_EQ(r.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_EQ(Decide({{{"regular", "r"}}}).overall_code(), Response::OVER_LIMIT);
}

// Verifies the dynamic metadata: the request, and the descriptors' metadata of those that
// passed, merged with the first value winning and maps merged key by key.
TEST_F(UpstreamCompatTest, DynamicMetadataDescribesRequestAndPassedDescriptors) {
  Response off = Decide({{{"quota", "a"}}});
  EXPECT_FALSE(off.has_dynamic_metadata());

  RateLimiterOptions options;
  options.respond.response_dynamic_metadata = true;
  Rebuild(options);
  Request request = MakeRequest({{{"quota", "b"}}, {{"regular", "b"}}, {{"files", "img/z"}}}, 1);
  request.mutable_descriptors(1)->mutable_hits_addend()->set_value(2);
  request.mutable_descriptors(2)->mutable_hits_addend()->set_value(1);
  Response r = Decide(request);
  ASSERT_TRUE(r.has_dynamic_metadata());
  const auto& fields = r.dynamic_metadata().fields();
  EXPECT_EQ(fields.at("domain").string_value(), "up");
  EXPECT_EQ(fields.at("hitsAddend").number_value(), 1);
  const auto& descriptors = fields.at("descriptors").list_value();
  ASSERT_EQ(descriptors.values_size(), 3);
  EXPECT_EQ(descriptors.values(0).struct_value().fields().at("entries").list_value().values(0)
                .string_value(),
            "quota=b");
  EXPECT_EQ(descriptors.values(2).struct_value().fields().at("hitsAddend").number_value(), 1);
  // regular=b with 2 hits is over its limit of 1: only quota's metadata counts.
  EXPECT_EQ(r.statuses(1).code(), Response::OVER_LIMIT);
  const auto& metadata = fields.at("metadata").struct_value().fields();
  EXPECT_EQ(metadata.at("name").string_value(), "quota_service");
  EXPECT_FALSE(metadata.at("owner").struct_value().fields().contains("on_call"));

  // Both pass: quota's name wins (first), owner maps merge.
  Response merged = Decide(MakeRequest({{{"quota", "c"}}, {{"regular", "c"}}}));
  const auto& both = merged.dynamic_metadata().fields().at("metadata").struct_value().fields();
  EXPECT_EQ(both.at("name").string_value(), "quota_service");
  EXPECT_EQ(both.at("owner").struct_value().fields().at("team").string_value(), "a");
  EXPECT_EQ(both.at("owner").struct_value().fields().at("on_call").string_value(), "x");
  EXPECT_FALSE(merged.dynamic_metadata().fields().contains("hitsAddend"));
}

// Verifies an unlimited descriptor answers OK with remaining 2^32 - 1 and no limit, and that its
// rule's replaces still drops the rule it names.
TEST_F(UpstreamCompatTest, UnlimitedAnswersMaxRemainingAndReplaces) {
  for (int i = 0; i < 3; ++i) {
    Response r = Decide({{{"internal", "x"}}, {{"user", "u"}}});
    EXPECT_EQ(r.overall_code(), Response::OK);
    EXPECT_EQ(r.statuses(0).code(), Response::OK);
    EXPECT_EQ(r.statuses(0).limit_remaining(), 4294967295u);
    EXPECT_FALSE(r.statuses(0).has_current_limit());
    EXPECT_FALSE(r.statuses(0).has_duration_until_reset());
    EXPECT_FALSE(r.statuses(1).has_current_limit());  // per_user was replaced
  }
  // Without the unlimited descriptor, per_user applies.
  Decide({{{"user", "u"}}});
  EXPECT_EQ(Decide({{{"user", "u"}}}).overall_code(), Response::OVER_LIMIT);
}

// Verifies a descriptor without entries is OK with no limit, and a 64-bit hits_addend is taken
// as it is (denied, since no limit can hold it), not refused.
TEST_F(UpstreamCompatTest, EmptyDescriptorAndHugeHits) {
  Request empty = MakeRequest({{}, {{"near", "a"}}});
  Response r = Decide(empty);
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_FALSE(r.statuses(0).has_current_limit());

  Request huge = MakeRequest({{{"near", "big"}}});
  huge.mutable_descriptors(0)->mutable_hits_addend()->set_value(uint64_t{1} << 40);
  Response denied = Decide(huge);
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.near"), "1099511627777");
  // Nothing was consumed by the denied request.
  EXPECT_EQ(Decide({{{"near", "big"}}}).statuses(0).limit_remaining(), 9u);
}

// Verifies upstream's near_limit and over_limit arithmetic with a ratio of 0.8 on a limit of
// 10: hits up to 8 are not near, hits past 8 are, and a denial counts only hits past 10 as over
// and the rest of the band as near.
TEST_F(UpstreamCompatTest, NearLimitAccounting) {
  Decide({{{"near", "n"}}}, 8);
  EXPECT_EQ(Metric("sluice_rule_near_limit", "up.near"), "0");
  Decide({{{"near", "n"}}}, 1);
  EXPECT_EQ(Metric("sluice_rule_near_limit", "up.near"), "1");
  EXPECT_EQ(Decide({{{"near", "n"}}}, 3).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Metric("sluice_rule_near_limit", "up.near"), "2");
  EXPECT_EQ(Metric("sluice_rule_over_limit", "up.near"), "2");
  EXPECT_EQ(Metric("sluice_rule_within_limit", "up.near"), "9");
  EXPECT_EQ(Metric("sluice_rule_total_hits", "up.near"), "12");

  RateLimiterOptions options;
  options.respond.near_limit_ratio = 0.5;
  Rebuild(options);
  Decide({{{"near", "m"}}}, 6);
  EXPECT_EQ(Metric("sluice_rule_near_limit", "up.near"), "3");  // 2 + (6 - 5)
}

// Verifies the RateLimit-* headers of the descriptor closest to its limit, their names, and
// that retry-after can be switched off.
TEST_F(UpstreamCompatTest, RateLimitHeaders) {
  EXPECT_EQ(Header(Decide({{{"near", "h"}}}), "RateLimit-Limit"), "absent");
  RateLimiterOptions options;
  options.respond.rate_limit_headers = true;
  Rebuild(options);
  clock_.AdvanceMicros(15'500'000);  // 44.5 s left in the minute window
  Response r = Decide({{{"near", "k"}}, {{"client", "c"}}, {{"nothing", "x"}}});
  EXPECT_EQ(Header(r, "RateLimit-Limit"), "10");
  EXPECT_EQ(Header(r, "RateLimit-Remaining"), "9");
  EXPECT_EQ(Header(r, "RateLimit-Reset"), "45");

  options.respond.limit_header = "X-Limit";
  options.respond.remaining_header = "X-Remaining";
  options.respond.reset_header = "X-Reset";
  options.respond.retry_after_header = false;
  Rebuild(options);
  Decide({{{"regular", "h"}}});
  Response over = Decide({{{"near", "h"}}, {{"regular", "h"}}});
  EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Header(over, "X-Limit"), "1");
  EXPECT_EQ(Header(over, "X-Remaining"), "0");
  EXPECT_EQ(Header(over, "retry-after"), "absent");
}

// Verifies the global shadow mode answers OK overall while statuses still say OVER_LIMIT.
TEST_F(UpstreamCompatTest, GlobalShadowMode) {
  RateLimiterOptions options;
  options.respond.global_shadow_mode = true;
  Rebuild(options);
  Decide({{{"regular", "s"}}});
  Response r = Decide({{{"regular", "s"}}});
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_EQ(r.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(Header(r, "retry-after"), "absent");
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("sluice_global_shadow_mode_total 1"));
}

// Verifies the default (a denied request consumes nothing) against upstream's increment-first
// counting (--default_charge=always), on a fixed window of 10.
TEST_F(UpstreamCompatTest, DefaultChargeSwitch) {
  Decide({{{"near", "d"}}}, 8);
  EXPECT_EQ(Decide({{{"near", "d"}}}, 5).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Decide({{{"near", "d"}}}, 1).overall_code(), Response::OK);  // 9 of 10

  RateLimiterOptions options;
  options.default_charge = Charge::kAlways;
  Rebuild(options);
  Decide({{{"near", "e"}}}, 8);
  EXPECT_EQ(Decide({{{"near", "e"}}}, 5).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Decide({{{"near", "e"}}}, 1).overall_code(), Response::OVER_LIMIT);  // 13 counted

  // More hits than the rule can ever hold: denied as never admitted (no retry-after: no wait
  // helps), and charged all the same, as upstream's INCRBY charges them.
  const Response never = Decide({{{"near", "f"}}}, 25);
  EXPECT_EQ(never.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Header(never, "retry-after"), "absent");
  EXPECT_EQ(Decide({{{"near", "f"}}}, 1).overall_code(), Response::OVER_LIMIT);  // 26 counted
  const std::string text = metrics_.Serialize();
  EXPECT_THAT(text, HasSubstr("sluice_decisions_total{algorithm=\"fixed_window\","
                              "outcome=\"never_admitted\"} 1"));
  // Charged while denied: 5 and 1 of "e", 25 and 1 of "f".
  EXPECT_THAT(text,
              HasSubstr("sluice_hits_charged_over_limit_total{algorithm=\"fixed_window\"} 32"));
}

// Verifies a rule without requests_per_unit (upstream: a limit of 0) denies every request.
TEST_F(UpstreamCompatTest, MissingRequestsPerUnitIsZero) {
  Response r = Decide({{{"blocked", "b"}}});
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 0u);
}

// Verifies that while no configuration is loaded (forced start), calls fail UNAVAILABLE.
TEST_F(UpstreamCompatTest, NoConfigIsUnavailable) {
  ConfigStore empty(nullptr);
  RateLimiter limiter(empty, backend_, clock_, metrics_, RateLimiterOptions());
  Response response;
  absl::Status status;
  limiter.ShouldRateLimit(MakeRequest({{{"near", "x"}}}), &response,
                          [&](absl::Status s) { status = s; });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "no rate limit configuration loaded yet");
}

}  // namespace
}  // namespace sluice
