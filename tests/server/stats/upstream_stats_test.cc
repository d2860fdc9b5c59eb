#include "server/stats/upstream_stats.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

std::unique_ptr<StatsdMapper> Builtin(bool response_time_ms) {
  auto mapper = StatsdMapper::FromYaml(kBuiltinMappingName, BuiltinStatsdMapping(response_time_ms));
  EXPECT_TRUE(mapper.ok()) << mapper.status();
  return mapper.ok() ? std::move(*mapper) : nullptr;
}

// Verifies the built-in mapping gives the names and labels of upstream's default mapping: one
// key by glob, two by regex, the error, request, response-time and config-load rules.
TEST(UpstreamStatsTest, BuiltinMappingMapsUpstreamNames) {
  auto mapper = Builtin(false);
  ASSERT_NE(mapper, nullptr);
  EXPECT_EQ(mapper->rule_count(), 15u);
  auto one = mapper->Map("ratelimit.service.rate_limit.foo.bar_baz.total_hits",
                         StatsdType::kCounter);
  EXPECT_EQ(one->name, "ratelimit_service_rate_limit_total_hits");
  EXPECT_THAT(one->labels, ElementsAre(Pair("domain", "foo"), Pair("key1", "bar_baz")));
  for (const char* counter : {"near_limit", "over_limit", "within_limit", "shadow_mode"}) {
    auto two = mapper->Map(
        std::string("ratelimit.service.rate_limit.foo.k1_a.k2_b.") + counter,
        StatsdType::kCounter);
    EXPECT_EQ(two->name, std::string("ratelimit_service_rate_limit_") + counter);
    EXPECT_THAT(two->labels,
                ElementsAre(Pair("domain", "foo"), Pair("key1", "k1_a"), Pair("key2", "k2_b")));
  }
  auto error = mapper->Map("ratelimit.service.call.should_rate_limit.redis_error",
                           StatsdType::kCounter);
  EXPECT_EQ(error->name, "ratelimit_service_should_rate_limit_error");
  EXPECT_THAT(error->labels, ElementsAre(Pair("err_type", "redis_error")));
  auto requests = mapper->Map("ratelimit_server.ShouldRateLimit.total_requests",
                              StatsdType::kCounter);
  EXPECT_EQ(requests->name, "ratelimit_service_total_requests");
  EXPECT_THAT(requests->labels, ElementsAre(Pair("grpc_method", "ShouldRateLimit")));
  EXPECT_EQ(mapper->Map("ratelimit.service.config_load_success", StatsdType::kCounter)->name,
            "ratelimit_service_config_load_success");
  // match_metric_type: counter; a gauge of that name is not mapped.
  EXPECT_FALSE(mapper->Map("ratelimit.service.config_load_error", StatsdType::kGauge)->matched);

  auto seconds = mapper->Map("ratelimit_server.ShouldRateLimit.response_time",
                             StatsdType::kObserver);
  EXPECT_EQ(seconds->name, "ratelimit_service_response_time_seconds");
  EXPECT_EQ(seconds->observer_type, ObserverType::kHistogram);
  ASSERT_TRUE(seconds->scale.has_value());
  EXPECT_DOUBLE_EQ(*seconds->scale, 0.001);
  auto ms = Builtin(true);
  ASSERT_NE(ms, nullptr);
  EXPECT_FALSE(ms->Map("ratelimit_server.ShouldRateLimit.response_time", StatsdType::kObserver)
                   ->scale.has_value());
}

// Verifies stat keys are sanitized as upstream does before they become statsd names.
TEST(UpstreamStatsTest, SanitizesStatKeysAsUpstream) {
  EXPECT_EQ(SanitizeStatName("d.remote_address_10.0.0.1"), "d.remote_address_10_0_0_1");
  EXPECT_EQ(SanitizeStatName("d.path_/a:b|c"), "d.path_/a_b_c");
  EXPECT_EQ(SanitizeStatName("d.v_1.2.3"), "d.v_1.2.3");
  EXPECT_EQ(SanitizeStatName("d.x_1234.5.6.7.8"), "d.x_1234_5_6_7.8");
}

// Verifies the samples read from Metrics: per-rule counters under upstream's names, only those
// that are non-zero, the folded key left out, and the service and gRPC values.
TEST(UpstreamStatsTest, SamplesComeFromSluiceCounters) {
  // Two keys per shard: the two below fit whichever shards they hash to (the hash is seeded per
  // process); the hundred at the end do not.
  Metrics metrics(/*max_rule_series=*/32);
  metrics.CountRule("foo.bar_baz", RuleHits{.total = 5, .within_limit = 3, .over_limit = 2});
  metrics.CountRule("foo.ip_10.0.0.1", RuleHits{.near_limit = 1});
  metrics.CountRule("foo.bar_baz", RuleHits{.total_negative = 4});
  metrics.ConfigInForce(1, "v1", absl::Now());
  metrics.CountConfigReload(false);
  metrics.CountBackendFailure(FailureReason::kTimeoutInFlight);
  metrics.CountRequest(Metrics::RequestOutcome::kInvalidArgument);
  metrics.RequestLatency(Transport::kGrpc).Record(1500);
  metrics.RequestLatency(Transport::kHttp).Record(1500);  // not a gRPC call: not counted

  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<std::string> observers;
  for (const StatsdSample& sample : UpstreamStatsdSamples(metrics)) {
    if (sample.type == StatsdType::kCounter) {
      counters.emplace_back(sample.name, sample.value);
    } else {
      observers.push_back(sample.name);
      EXPECT_EQ(sample.observations.sum_us, 1500u);
    }
  }
  EXPECT_THAT(counters,
              UnorderedElementsAre(
                  Pair("ratelimit.service.rate_limit.foo.bar_baz.total_hits", 5),
                  Pair("ratelimit.service.rate_limit.foo.bar_baz.over_limit", 2),
                  Pair("ratelimit.service.rate_limit.foo.bar_baz.within_limit", 3),
                  Pair("ratelimit.service.rate_limit.foo.ip_10_0_0_1.near_limit", 1),
                  Pair("ratelimit.service.rate_limit.foo.bar_baz.total_negative_hits", 4),
                  Pair("ratelimit.service.config_load_success", 1),
                  Pair("ratelimit.service.config_load_error", 1),
                  Pair("ratelimit.service.call.should_rate_limit.redis_error", 1),
                  Pair("ratelimit.service.call.should_rate_limit.service_error", 1),
                  Pair("ratelimit_server.ShouldRateLimit.total_requests", 1)));
  EXPECT_THAT(observers, ElementsAre("ratelimit_server.ShouldRateLimit.response_time"));

  // Past the cap, keys fold into Sluice's own "_folded" series, which upstream has no name for.
  for (int i = 0; i < 100; ++i) {
    metrics.CountRule(absl::StrCat("foo.many_", i), RuleHits{.total = 1});
  }
  for (const StatsdSample& sample : UpstreamStatsdSamples(metrics)) {
    EXPECT_EQ(sample.name.find("_folded"), std::string::npos) << sample.name;
  }
}

// Verifies a Metrics nothing has counted into yields no sample, as upstream flushes nothing.
TEST(UpstreamStatsTest, NothingCountedNothingEmitted) {
  Metrics metrics;
  EXPECT_THAT(UpstreamStatsdSamples(metrics), IsEmpty());
}

}  // namespace
}  // namespace sluice
