#include "server/stats/prometheus_exposition.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/stats/upstream_stats.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<StatsdMapper> Mapper(const std::string& yaml) {
  auto mapper = StatsdMapper::FromYaml("m.yaml", yaml);
  EXPECT_TRUE(mapper.ok()) << mapper.status();
  return mapper.ok() ? std::move(*mapper) : nullptr;
}

StatsdSample Counter(std::string name, uint64_t value) {
  StatsdSample sample;
  sample.name = std::move(name);
  sample.value = value;
  return sample;
}

// Verifies a scrape through the built-in mapping serves what Envoy Gateway's dashboard
// queries: counters under their mapped names with domain and key labels and no _total suffix,
// unmapped names escaped, and the gRPC response time as a histogram in seconds.
TEST(PrometheusExpositionTest, BuiltinMappingServesUpstreamSurface) {
  Metrics metrics;
  metrics.CountRule("foo.bar_baz",
                    RuleHits{.total = 4, .over_limit = 1, .over_limit_with_local_cache = 1});
  metrics.CountRule("foo.k1_a.k2_b", RuleHits{.total = 2});
  metrics.CountGlobalShadowMode();
  metrics.ConfigInForce(1, "v", absl::Now());
  for (int64_t micros : {3000, 4000, 7000, 600000}) {
    metrics.RequestLatency(Transport::kGrpc).Record(micros);
  }
  auto mapper = StatsdMapper::FromYaml(kBuiltinMappingName, BuiltinStatsdMapping(false));
  ASSERT_TRUE(mapper.ok()) << mapper.status();
  const std::string text = RenderPrometheusText(**mapper, UpstreamStatsdSamples(metrics));

  EXPECT_THAT(text, HasSubstr("# TYPE ratelimit_service_rate_limit_total_hits counter\n"));
  EXPECT_THAT(text, HasSubstr(
      "ratelimit_service_rate_limit_total_hits{domain=\"foo\",key1=\"bar_baz\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("ratelimit_service_rate_limit_total_hits{domain=\"foo\","
                              "key1=\"k1_a\",key2=\"k2_b\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(
      "ratelimit_service_rate_limit_over_limit{domain=\"foo\",key1=\"bar_baz\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("near_limit")));  // never counted: never flushed upstream
  EXPECT_THAT(text, Not(HasSubstr("_total{")));
  EXPECT_THAT(text, HasSubstr(
      "ratelimit_service_rate_limit_foo_bar_baz_over_limit_with_local_cache 1\n"));
  EXPECT_THAT(text, HasSubstr("ratelimit_service_global_shadow_mode 1\n"));
  EXPECT_THAT(text, HasSubstr("ratelimit_service_config_load_success 1\n"));
  EXPECT_THAT(text, HasSubstr(
      "ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ratelimit_service_response_time_seconds histogram\n"));
  const std::string bucket = "ratelimit_service_response_time_seconds_bucket{grpc_method="
                             "\"ShouldRateLimit\",le=";
  EXPECT_THAT(text, HasSubstr(bucket + "\"0.005\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(bucket + "\"0.01\"} 3\n"));
  EXPECT_THAT(text, HasSubstr(bucket + "\"0.5\"} 3\n"));
  EXPECT_THAT(text, HasSubstr(bucket + "\"1\"} 4\n"));
  EXPECT_THAT(text, HasSubstr(bucket + "\"+Inf\"} 4\n"));
  EXPECT_THAT(text, HasSubstr(
      "ratelimit_service_response_time_seconds_sum{grpc_method=\"ShouldRateLimit\"} 0.614\n"));
  EXPECT_THAT(text, HasSubstr(
      "ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"} 4\n"));
}

// Verifies without the scale (PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS, or Envoy Gateway's
// file) observations are milliseconds against the same bounds, as upstream serves them.
TEST(PrometheusExpositionTest, ResponseTimeInMillisecondsWithoutScale) {
  Metrics metrics;
  for (int64_t micros : {40, 3000, 7000}) {
    metrics.RequestLatency(Transport::kGrpc).Record(micros);
  }
  auto mapper = StatsdMapper::FromYaml(kBuiltinMappingName, BuiltinStatsdMapping(true));
  ASSERT_TRUE(mapper.ok());
  const std::string text = RenderPrometheusText(**mapper, UpstreamStatsdSamples(metrics));
  const std::string bucket = "ratelimit_service_response_time_seconds_bucket{grpc_method="
                             "\"ShouldRateLimit\",le=";
  EXPECT_THAT(text, HasSubstr(bucket + "\"0.05\"} 1\n"));  // 0.04 ms
  EXPECT_THAT(text, HasSubstr(bucket + "\"2.5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(bucket + "\"5\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(bucket + "\"10\"} 3\n"));
  EXPECT_THAT(text, HasSubstr(
      "ratelimit_service_response_time_seconds_sum{grpc_method=\"ShouldRateLimit\"} 10.04\n"));
}

// Verifies samples mapping to one name and label set add up (upstream's two-key
// over_limit_with_local_cache lands in over_limit), and a rule's scale applies to counters.
TEST(PrometheusExpositionTest, SameSeriesAddsUpAndScaleApplies) {
  auto mapper = Mapper(R"yaml(mappings:
  - match: "a\\.(\\w+)\\.over_limit"
    match_type: regex
    name: "over"
    labels: {key: "$1"}
  - match: "kib.*"
    name: "bytes"
    scale: 1024
)yaml");
  ASSERT_NE(mapper, nullptr);
  const std::string text = RenderPrometheusText(
      *mapper, {Counter("a.x.over_limit", 2), Counter("a.x.over_limit_with_local_cache", 3),
                Counter("kib.in", 2)});
  EXPECT_THAT(text, HasSubstr("over{key=\"x\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("bytes 2048\n"));
}

// Verifies a sample whose name is taken by another type is left out, while other label names
// share the name; dropped samples are left out; label values are escaped; an observer nothing
// types is a summary with _sum and _count.
TEST(PrometheusExpositionTest, ConflictsDropsEscapesAndSummaries) {
  auto mapper = Mapper(R"yaml(mappings:
  - match: "c.*"
    name: "shared"
    labels: {which: "$1"}
  - match: "t.*"
    name: "shared"
  - match: "other.*"
    name: "shared"
    labels: {another: "$1"}
  - match: "gone.*"
    name: "gone"
    action: drop
  - match: "timer.*"
    name: "timer_ms"
)yaml");
  ASSERT_NE(mapper, nullptr);
  StatsdSample timer;
  timer.name = "t.x";
  timer.type = StatsdType::kObserver;
  timer.observations.buckets[0] = 2;
  timer.observations.sum_us = 6;
  StatsdSample summary = timer;
  summary.name = "timer.y";
  const std::string text = RenderPrometheusText(
      *mapper, {Counter("c.a\"b", 1), timer, Counter("other.z", 1), Counter("gone.x", 9),
                summary});
  EXPECT_THAT(text, HasSubstr("# TYPE shared counter\n"));
  EXPECT_THAT(text, HasSubstr("shared{which=\"a\\\"b\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("shared{another=\"z\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("shared_sum")));
  EXPECT_THAT(text, Not(HasSubstr("gone")));
  EXPECT_THAT(text, HasSubstr("# TYPE timer_ms summary\ntimer_ms_sum 0.006\ntimer_ms_count 2\n"));
}

}  // namespace
}  // namespace sluice
