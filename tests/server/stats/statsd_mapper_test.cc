#include "server/stats/statsd_mapper.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

using Labels = std::vector<std::pair<std::string, std::string>>;

std::unique_ptr<StatsdMapper> Mapper(const std::string& yaml) {
  auto mapper = StatsdMapper::FromYaml("mapper.yaml", yaml);
  EXPECT_TRUE(mapper.ok()) << mapper.status();
  return mapper.ok() ? std::move(*mapper) : nullptr;
}

std::string Refusal(const std::string& yaml) {
  auto mapper = StatsdMapper::FromYaml("mapper.yaml", yaml);
  EXPECT_FALSE(mapper.ok()) << yaml;
  return mapper.ok() ? "" : std::string(mapper.status().message());
}

// Rules in the shape of Envoy Gateway's statsd_conf.yaml (and envoyproxy/ratelimit's default
// mapping without its scale): one-key per-rule counters by glob, two keys and more by regex.
constexpr char kGatewayLike[] = R"yaml(mappings:
  - match: "ratelimit.service.rate_limit.*.*.over_limit"
    name: "ratelimit_service_rate_limit_over_limit"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
  - match: "ratelimit\\.service\\.rate_limit\\.([^\\.]*)\\.([^\\.]*)\\.([^\\.]*)(\\..*)?\\.over_limit"
    match_type: regex
    name: "ratelimit_service_rate_limit_over_limit"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
      key2: "$3"
  - match: "ratelimit\\.service\\.rate_limit\\.([^\\.]*)\\.([^\\.]*)\\.([^\\.]*)(\\..*)?\\.total_hits"
    match_type: regex
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
      key2: "$3"
  - match: "ratelimit_server.*.total_requests"
    name: "ratelimit_service_total_requests"
    match_metric_type: counter
    labels:
      grpc_method: "$1"
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    timer_type: histogram
    labels:
      grpc_method: "$1"
)yaml";

// Verifies a glob `*` captures one whole component into labels, and one-key per-rule names map
// as Envoy Gateway's dashboard expects.
TEST(StatsdMapperTest, GlobCapturesComponentsIntoLabels) {
  auto mapper = Mapper(kGatewayLike);
  ASSERT_NE(mapper, nullptr);
  auto m = mapper->Map("ratelimit.service.rate_limit.foo.bar_baz.total_hits", StatsdType::kCounter);
  EXPECT_TRUE(m->matched);
  EXPECT_FALSE(m->drop);
  EXPECT_EQ(m->name, "ratelimit_service_rate_limit_total_hits");
  EXPECT_THAT(m->labels, ElementsAre(Pair("domain", "foo"), Pair("key1", "bar_baz")));
  EXPECT_EQ(m->rule_line, 8);
}

// Verifies a two-key name, which no glob rule matches, goes through the regex rules with their
// captures; a third key is absorbed by the optional group.
TEST(StatsdMapperTest, RegexRulesCaptureTwoKeys) {
  auto mapper = Mapper(kGatewayLike);
  ASSERT_NE(mapper, nullptr);
  auto two = mapper->Map("ratelimit.service.rate_limit.foo.k1_v1.k2_v2.over_limit",
                         StatsdType::kCounter);
  EXPECT_EQ(two->name, "ratelimit_service_rate_limit_over_limit");
  EXPECT_THAT(two->labels,
              ElementsAre(Pair("domain", "foo"), Pair("key1", "k1_v1"), Pair("key2", "k2_v2")));
  auto three = mapper->Map("ratelimit.service.rate_limit.foo.a.b.c.total_hits",
                           StatsdType::kCounter);
  EXPECT_EQ(three->name, "ratelimit_service_rate_limit_total_hits");
  EXPECT_THAT(three->labels,
              ElementsAre(Pair("domain", "foo"), Pair("key1", "a"), Pair("key2", "b")));
}

// Verifies regexes search unanchored, as Go's do: with Envoy Gateway's rules, a two-key
// over_limit_with_local_cache counts under over_limit (upstream's behaviour), while the one-key
// one stays unmapped.
TEST(StatsdMapperTest, RegexMatchesAnywhereInTheName) {
  auto mapper = Mapper(kGatewayLike);
  ASSERT_NE(mapper, nullptr);
  auto two = mapper->Map("ratelimit.service.rate_limit.d.a_1.b_2.over_limit_with_local_cache",
                         StatsdType::kCounter);
  EXPECT_EQ(two->name, "ratelimit_service_rate_limit_over_limit");
  auto one = mapper->Map("ratelimit.service.rate_limit.d.a_1.over_limit_with_local_cache",
                         StatsdType::kCounter);
  EXPECT_FALSE(one->matched);
  EXPECT_EQ(one->name, "ratelimit_service_rate_limit_d_a_1_over_limit_with_local_cache");
}

// Verifies the first matching rule wins within globs, and every glob rule is tried before any
// regex rule, even one earlier in the file.
TEST(StatsdMapperTest, FirstMatchWinsGlobsBeforeRegexes) {
  auto mapper = Mapper(R"yaml(mappings:
  - match: "a\\.(.*)"
    match_type: regex
    name: "by_regex"
  - match: "a.*"
    name: "first_glob"
  - match: "a.b"
    name: "second_glob"
  - match: "x\\..*"
    match_type: regex
    name: "first_regex"
  - match: "x\\.y"
    match_type: regex
    name: "second_regex"
)yaml");
  ASSERT_NE(mapper, nullptr);
  EXPECT_EQ(mapper->Map("a.b", StatsdType::kCounter)->name, "first_glob");
  EXPECT_EQ(mapper->Map("a.b.c", StatsdType::kCounter)->name, "by_regex");
  EXPECT_EQ(mapper->Map("x.y", StatsdType::kCounter)->name, "first_regex");
}

// Verifies action: drop drops what it matches (and only that), match_metric_type restricts a
// rule to one statsd type (timer meaning observer), and defaults.match_type makes rules regexes.
TEST(StatsdMapperTest, DropAndMatchMetricTypeAndDefaultMatchType) {
  auto mapper = Mapper(R"yaml(defaults:
  match_type: regex
mappings:
  - match: "^noise\\."
    name: "dropped"
    action: drop
  - match: "^t\\.(\\w+)$"
    name: "timer_$1"
    match_metric_type: timer
  - match: "^t\\.(\\w+)$"
    name: "counter_${1}"
    match_metric_type: counter
)yaml");
  ASSERT_NE(mapper, nullptr);
  auto dropped = mapper->Map("noise.x", StatsdType::kCounter);
  EXPECT_TRUE(dropped->matched);
  EXPECT_TRUE(dropped->drop);
  EXPECT_FALSE(mapper->Map("signal.noise.x", StatsdType::kCounter)->drop);
  EXPECT_EQ(mapper->Map("t.abc", StatsdType::kObserver)->name, "timer_abc");
  EXPECT_EQ(mapper->Map("t.abc", StatsdType::kCounter)->name, "counter_abc");
  EXPECT_FALSE(mapper->Map("t.abc", StatsdType::kGauge)->matched);
}

// Verifies an unmapped name is escaped as statsd_exporter escapes it: invalid characters become
// '_', a run of dashes one '_', a leading digit gets a '_' in front; mapped names are escaped
// too.
TEST(StatsdMapperTest, UnmappedNamesAreEscaped) {
  EXPECT_EQ(EscapeMetricName("ratelimit.service.global_shadow_mode"),
            "ratelimit_service_global_shadow_mode");
  EXPECT_EQ(EscapeMetricName("a--b---c-d"), "a_b_c_d");
  EXPECT_EQ(EscapeMetricName("9lives:x|y"), "_9lives_x_y");
  EXPECT_EQ(EscapeMetricName("caf\xc3\xa9.x"), "caf__x");
  EXPECT_EQ(EscapeMetricName(""), "");
  auto mapper = Mapper("mappings:\n  - match: \"a.*\"\n    name: \"m_$1\"\n");
  ASSERT_NE(mapper, nullptr);
  EXPECT_EQ(mapper->Map("a.b-c", StatsdType::kCounter)->name, "m_b_c");
  auto unmapped = mapper->Map("b.c-d", StatsdType::kGauge);
  EXPECT_FALSE(unmapped->matched);
  EXPECT_EQ(unmapped->name, "b_c_d");
  EXPECT_TRUE(unmapped->labels.empty());
}

// Verifies observer settings: a rule's timer_type and scale, buckets from the rule, from
// defaults, or Prometheus' DefBuckets; and an observer nothing types is a summary.
TEST(StatsdMapperTest, ObserverTypesBucketsAndScale) {
  auto mapper = Mapper(R"yaml(defaults:
  timer_type: histogram
  buckets: [0.1, 1]
mappings:
  - match: "own.*"
    name: "own"
    histogram_options:
      buckets: [1, 2, 3]
    scale: 0.001
  - match: "inherited.*"
    name: "inherited"
  - match: "summary.*"
    name: "summary"
    observer_type: summary
)yaml");
  ASSERT_NE(mapper, nullptr);
  auto own = mapper->Map("own.x", StatsdType::kObserver);
  EXPECT_EQ(own->observer_type, ObserverType::kHistogram);
  EXPECT_THAT(own->buckets, ElementsAre(1, 2, 3));
  ASSERT_TRUE(own->scale.has_value());
  EXPECT_DOUBLE_EQ(*own->scale, 0.001);
  auto inherited = mapper->Map("inherited.x", StatsdType::kObserver);
  EXPECT_EQ(inherited->observer_type, ObserverType::kHistogram);
  EXPECT_THAT(inherited->buckets, ElementsAre(0.1, 1));
  EXPECT_FALSE(inherited->scale.has_value());
  EXPECT_EQ(mapper->Map("summary.x", StatsdType::kObserver)->observer_type,
            ObserverType::kSummary);
  EXPECT_EQ(mapper->Map("unmapped", StatsdType::kObserver)->observer_type,
            ObserverType::kHistogram);

  auto plain = Mapper("mappings:\n  - match: \"a\"\n    name: \"a\"\n    timer_type: histogram\n");
  ASSERT_NE(plain, nullptr);
  EXPECT_THAT(plain->Map("a", StatsdType::kObserver)->buckets,
              ElementsAre(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10));
  EXPECT_EQ(plain->Map("b", StatsdType::kObserver)->observer_type, ObserverType::kSummary);
}

// Verifies each distinct name is matched once and then served from the cache, which is bounded.
TEST(StatsdMapperTest, CachesEachNameOnceWithinItsBound) {
  auto mapper = StatsdMapper::FromYaml("m.yaml", kGatewayLike, /*cache_entries=*/2);
  ASSERT_TRUE(mapper.ok());
  const std::string name = "ratelimit.service.rate_limit.foo.bar.total_hits";
  auto first = (*mapper)->Map(name, StatsdType::kCounter);
  auto again = (*mapper)->Map(name, StatsdType::kCounter);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ((*mapper)->matches_computed(), 1u);
  (*mapper)->Map(name, StatsdType::kObserver);  // another type is another entry
  EXPECT_EQ((*mapper)->matches_computed(), 2u);
  (*mapper)->Map("other", StatsdType::kCounter);  // over the bound: the cache starts over
  (*mapper)->Map(name, StatsdType::kCounter);
  EXPECT_EQ((*mapper)->matches_computed(), 4u);
  EXPECT_EQ(first->name, "ratelimit_service_rate_limit_total_hits");  // still valid
}

// Verifies files using what is not implemented, or what statsd_exporter refuses, are refused
// with file, line and field.
TEST(StatsdMapperTest, RefusesBadFilesNamingLineAndField) {
  EXPECT_EQ(Refusal("mappings:\n  - match: a\n    name: a\n    ttl: 1m\n"),
            "mapper.yaml:4: mappings[0].ttl: not supported: Sluice's series are cumulative and "
            "never expire");
  EXPECT_THAT(Refusal("mappings:\n  - match: a\n    name: a\n    colour: red\n"),
              HasSubstr("mapper.yaml:4: mappings[0].colour: unknown key"));
  EXPECT_EQ(Refusal("mappings:\n  - match: a\n    labels: {x1: y}\n"),
            "mapper.yaml:2: mappings[0].name: required (statsd_exporter needs a name even with "
            "action: drop)");
  EXPECT_THAT(Refusal("mappings:\n  - match: a\n    name: a\n  - match: b\n    name: \"b-c\"\n"),
              HasSubstr("mapper.yaml:5: mappings[1].name: 'b-c' is not a metric name"));
  EXPECT_THAT(Refusal("mappings:\n  - match: \"a.b*\"\n    name: a\n"),
              HasSubstr("mapper.yaml:2: mappings[0].match: 'a.b*' is not a glob pattern"));
  EXPECT_THAT(Refusal("mappings:\n  - match: \"a(\"\n    match_type: regex\n    name: a\n"),
              HasSubstr("mapper.yaml:2: mappings[0].match: invalid regex: missing )"));
  EXPECT_THAT(Refusal("mappings:\n  - match: a\n    name: a\n    labels:\n      x: y\n"),
              HasSubstr("mapper.yaml:5: mappings[0].labels.x: invalid label name"));
  EXPECT_EQ(Refusal("mappings:\n  - match: a\n    name: a\n    action: keep\n"),
            "mapper.yaml:4: mappings[0].action: 'keep' is not map or drop");
  EXPECT_EQ(Refusal("mappings:\n  - match: a\n    name: a\n    match_metric_type: set\n"),
            "mapper.yaml:4: mappings[0].match_metric_type: 'set' is not counter, gauge, "
            "observer or timer");
  EXPECT_EQ(Refusal("defaults:\n  timer_type: exponential\n"),
            "mapper.yaml:2: defaults.timer_type: 'exponential' is not histogram or summary");
  EXPECT_THAT(Refusal("defaults:\n  quantiles: []\n"),
              HasSubstr("mapper.yaml:2: defaults.quantiles: not supported"));
  EXPECT_EQ(Refusal("mappings:\n  - match: a\n    name: a\n    buckets: [1, 0.5]\n"),
            "mapper.yaml:4: mappings[0].buckets[1]: bucket bounds must be in increasing order");
  EXPECT_EQ(Refusal("mappings:\n  - match: a\n    name: a\n    scale: 0\n"),
            "mapper.yaml:4: mappings[0].scale: must be a number more than 0");
  EXPECT_THAT(Refusal("mappings: [\n"), HasSubstr("mapper.yaml:"));
  EXPECT_THAT(Refusal("mappings: {a: b}\n"),
              HasSubstr("mapper.yaml:1: mappings: expected a list of rules"));
}

// Verifies a mapping file that cannot be opened is named.
TEST(StatsdMapperTest, MissingFileIsNamed) {
  auto mapper = StatsdMapper::FromFile("/nonexistent/mapper.yaml");
  ASSERT_FALSE(mapper.ok());
  EXPECT_THAT(mapper.status().message(), HasSubstr("/nonexistent/mapper.yaml"));
}

}  // namespace
}  // namespace sluice
