// Resolve, as a table: requests against one config, each with what every descriptor resolves to
// (its rules after overrides and replaces, stat key, hits, unlimited), the storage keys of its
// checks and their co-location groups. envoyproxy/ratelimit's matching and stat-key semantics
// (config_impl.go: exact before wildcard before default, no backtracking, the rule applies only
// at the last entry's level, share_threshold, value_to_metric, detailed_metric, replaces,
// unlimited, request-supplied limits) are the table's rows. No backend, no clock.
#include "server/service/resolve.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "tests/server/service/request_builder.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::Entries;
using Request = envoy::service::ratelimit::v3::RateLimitRequest;

constexpr char kConfig[] = R"(domain: d
failure_mode: local
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 10}
  - key: user
    value: vip
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: user
    value: "adm*"
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: internal
    rate_limit: {unlimited: true, replaces: [{name: per_user}]}
  - key: plan
    value: gold
    rate_limit: {unit: hour, requests_per_unit: 1000, replaces: [{name: per_user}]}
  - key: files
    value: "docs/*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: second, requests_per_unit: 3}
  - key: service
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: hour, requests_per_unit: 3, algorithm: sliding_window_log}
  - key: tenant
    descriptors:
      - key: calls
        rate_limit: {unit: minute, requests_per_unit: 10, hash_tag: tenant}
      - key: uploads
        rate_limit: {unit: minute, requests_per_unit: 1, hash_tag: tenant}
  - key: beta
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, hash_tag: beta}
  - key: "kw_*"
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: "sh*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 6}
)";

// One descriptor of a request and what it must resolve to.
struct Row {
  Entries entries;
  uint64_t hits = 0;              // 0: the descriptor has no hits_addend
  uint32_t override_limit = 0;    // > 0: a request-supplied limit of that many per minute
  // Rules, as "<requests_per_unit>/<unit>" with ":<name>" if named, in check order.
  std::vector<std::string> rules;
  std::string stat_key;  // "" when no rule applies
  uint64_t want_hits = 1;
  bool unlimited = false;
};

struct Case {
  const char* name;
  std::vector<Row> rows;
  uint32_t request_hits = 0;
  // The storage keys of the request's checks, in order, and each check's group.
  std::vector<std::string> keys;
  std::vector<uint32_t> groups;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string RuleText(const RateLimitRule& rule) {
  std::string text = absl::StrCat(rule.requests_per_unit, "/", UnitName(rule.unit));
  if (!rule.name.empty()) {
    absl::StrAppend(&text, ":", rule.name);
  }
  return text;
}

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {"ExactValueBeatsWildcardAndDefault",
       {{{{"user", "vip"}}, 0, 0, {"100/minute"}, "d.user_vip"}},
       0,
       {"rl:{d|user=vip}fw:60"},
       {0}},
      {"WildcardBeatsDefault",
       {{{{"user", "admin"}}, 0, 0, {"50/minute"}, "d.user_adm*"}},
       0,
       {"rl:{d|user=admin}fw:60"},
       {0}},
      {"DefaultWhenNothingElseMatches",
       {{{{"user", "bob"}}, 0, 0, {"10/minute:per_user"}, "d.user"}},
       0,
       {"rl:{d|user=bob}fw:60"},
       {0}},
      {"NoRuleAtAShallowerLevel",
       {{{{"route", "r1"}}, 0, 0, {}, ""}},
       0,
       {},
       {}},
      {"NoRuleAtADeeperLevel",
       {{{{"user", "bob"}, {"extra", "x"}}, 0, 0, {}, ""}},
       0,
       {},
       {}},
      {"UnknownKeyMatchesNothing",
       {{{{"color", "red"}}, 0, 0, {}, ""}},
       0,
       {},
       {}},
      {"ReplacesDropsTheNamedRuleInOtherDescriptors",
       {{{{"plan", "gold"}}, 0, 0, {"1000/hour"}, "d.plan_gold"},
        {{{"user", "bob"}}, 0, 0, {}, "d.user"}},
       0,
       {"rl:{d|plan=gold}fw:3600"},
       {0}},
      {"UnlimitedRuleStillReplaces",
       {{{{"internal", "x"}}, 0, 0, {}, "d.internal", 1, /*unlimited=*/true},
        {{{"user", "bob"}}, 0, 0, {}, "d.user"}},
       0,
       {},
       {}},
      {"ShareThresholdCountsThePatternOnce",
       {{{{"files", "docs/a.txt"}}, 0, 0, {"2/minute"}, "d.files_docs/*"}},
       0,
       {"rl:{d|files==docs/*}fw:60"},
       {0}},
      {"ValueToMetricNamesTheLevelByTheRequestValue",
       {{{{"route", "checkout"}, {"method", "GET"}}, 0, 0, {"3/second"},
         "d.route_checkout.method"}},
       0,
       {"rl:{d|route=checkout|method=GET}fw:1"},
       {0}},
      {"DetailedMetricNamesEveryValue",
       {{{{"service", "s1"}, {"endpoint", "/x"}}, 0, 0, {"80/minute"},
         "d.service_s1.endpoint_/x"}},
       0,
       {"rl:{d|service=s1|endpoint=/x}fw:60"},
       {0}},
      {"SeveralRulesOfOneDescriptorAreOneGroup",
       {{{{"both", "b"}}, 0, 0, {"2/second", "3/hour"}, "d.both"}},
       0,
       {"rl:{d|both=b}fw:1", "rl:{d|both=b}swl:3600"},
       {0, 0}},
      {"DescriptorHitsWinOverTheRequestHits",
       {{{{"user", "a"}}, 7, 0, {"10/minute:per_user"}, "d.user", 7},
        {{{"user", "b"}}, 0, 0, {"10/minute:per_user"}, "d.user", 3}},
       3,
       {"rl:{d|user=a}fw:60", "rl:{d|user=b}fw:60"},
       {0, 1}},
      // Its key names its limit: two overrides of different limits on one descriptor never
      // share a counter (erpc#1058), nor one with the configured rule.
      {"RequestSuppliedLimitReplacesTheRule",
       {{{{"user", "vip"}}, 0, 5, {"5/minute"}, "d.user_vip"}},
       0,
       {"rl:{d|user=vip}fw:60:l5"},
       {0}},
      // The same entries twice with different limits share the default hash tag, yet stay two
      // independent descriptors: co-location is asked for by `hash_tag` alone.
      {"SameEntriesWithDifferentOverridesStayApart",
       {{{{"user", "u"}}, 0, 10, {"10/minute"}, "d.user_u"},
        {{{"user", "u"}}, 0, 1000, {"1000/minute"}, "d.user_u"}},
       0,
       {"rl:{d|user=u}fw:60:l10", "rl:{d|user=u}fw:60:l1000"},
       {0, 1}},
      {"SharedHashTagCoLocatesDescriptors",
       {{{{"tenant", "t1"}, {"calls", "x"}}, 0, 0, {"10/minute"}, "d.tenant.calls"},
        {{{"tenant", "t1"}, {"uploads", "x"}}, 0, 0, {"1/minute"}, "d.tenant.uploads"}},
       0,
       {"rl:{d|tenant=t1}|tenant=t1|calls=x|fw:60", "rl:{d|tenant=t1}|tenant=t1|uploads=x|fw:60"},
       {0, 0}},
      {"DifferentTagsStayApart",
       {{{{"tenant", "t1"}, {"calls", "x"}}, 0, 0, {"10/minute"}, "d.tenant.calls"},
        {{{"tenant", "t2"}, {"uploads", "x"}}, 0, 0, {"1/minute"}, "d.tenant.uploads"}},
       0,
       {"rl:{d|tenant=t1}|tenant=t1|calls=x|fw:60", "rl:{d|tenant=t2}|tenant=t2|uploads=x|fw:60"},
       {0, 1}},
      // A `*` in a key matches the request's "key_value" (config_impl.go, GetLimit), and the
      // level is named by the request's key and the pattern less "<key>_" (TrimPrefix).
      {"KeyWildcardMatchesKeyAndValueText",
       {{{{"kw", "x"}}, 0, 0, {"4/minute"}, "d.kw_*"},
        {{{"kw_a", "b"}}, 0, 0, {"4/minute"}, "d.kw_a_kw_*"}},
       0,
       {"rl:{d|kw=x}fw:60", "rl:{d|kw_a=b}fw:60"},
       {0, 1}},
      {"KeyWildcardSharesOneCounterPerKey",
       {{{{"shop", "x"}}, 0, 0, {"6/minute"}, "d.shop_sh*"},
        {{{"shop", "y"}}, 0, 0, {"6/minute"}, "d.shop_sh*"}},
       0,
       {"rl:{d|shop==sh*}fw:60", "rl:{d|shop==sh*}fw:60"},
       {0, 1}},
      {"ShadowModeNeverJoinsAGroup",
       {{{{"beta", "t1"}}, 0, 0, {"1/minute"}, "d.beta"},
        {{{"beta", "t1"}}, 0, 0, {"1/minute"}, "d.beta"}},
       0,
       {"rl:{d|beta=t1}|beta=t1|fw:60", "rl:{d|beta=t1}|beta=t1|fw:60"},
       {0, 1}},
  };
  return *cases;
}

class ResolveTest : public ::testing::TestWithParam<Case> {
 protected:
  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigText("d.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }
};

// Verifies each row: per descriptor its rules, stat key, hits and unlimited flag; per check its
// storage key and group; the domain's failure_mode in the plan.
TEST_P(ResolveTest, ResolvesAsEnvoyproxyRatelimitMatches) {
  const Case& c = GetParam();
  std::vector<Entries> descriptors;
  for (const Row& row : c.rows) {
    descriptors.push_back(row.entries);
  }
  Request request = testing::MakeRequest("d", descriptors, c.request_hits);
  for (size_t i = 0; i < c.rows.size(); ++i) {
    auto* d = request.mutable_descriptors(static_cast<int>(i));
    if (c.rows[i].hits != 0) {
      d->mutable_hits_addend()->set_value(c.rows[i].hits);
    }
    if (c.rows[i].override_limit != 0) {
      d->mutable_limit()->set_requests_per_unit(c.rows[i].override_limit);
      d->mutable_limit()->set_unit(envoy::type::v3::RateLimitUnit::MINUTE);
    }
  }
  RequestPlan plan;
  ResolveOptions options;
  options.key_prefix = "rl:";
  Resolve(request, Load(), options, &plan);
  EXPECT_EQ(plan.failure_mode, FailureMode::kLocal);
  ASSERT_EQ(plan.descriptors.size(), c.rows.size());
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const DescriptorPlan& got = plan.descriptors[i];
    const Row& want = c.rows[i];
    std::vector<std::string> rules;
    for (const RateLimitRule* rule : got.rules) {
      rules.push_back(RuleText(*rule));
    }
    EXPECT_THAT(rules, ElementsAreArray(want.rules)) << "descriptor " << i;
    if (!want.rules.empty() || want.unlimited || !want.stat_key.empty()) {
      EXPECT_EQ(got.stat_key, want.stat_key) << "descriptor " << i;
    }
    EXPECT_EQ(got.hits, want.want_hits) << "descriptor " << i;
    EXPECT_EQ(got.unlimited, want.unlimited) << "descriptor " << i;
  }
  std::vector<std::string> keys;
  std::vector<uint32_t> groups;
  for (const LimitCheck& check : plan.checks) {
    keys.emplace_back(check.key);
    groups.push_back(check.group);
  }
  EXPECT_THAT(keys, ElementsAreArray(c.keys));
  EXPECT_THAT(groups, ElementsAreArray(c.groups));
}

INSTANTIATE_TEST_SUITE_P(Table, ResolveTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// Verifies an unknown domain resolves every descriptor to no rule, under the default failure
// mode, and that the options reach the checks (charge) and the plan (request metadata).
TEST(ResolveOptionsTest, UnknownDomainAndOptions) {
  auto config = LoadConfigText("d.yaml", kConfig);
  ASSERT_TRUE(config.ok()) << config.status();
  std::shared_ptr<const Config> shared(std::move(*config));
  RequestPlan unknown;
  ResolveOptions deny;
  deny.failure_mode = FailureMode::kDeny;
  Resolve(testing::MakeRequest("other", {{{"user", "vip"}}}), shared, deny, &unknown);
  EXPECT_EQ(unknown.failure_mode, FailureMode::kDeny);
  ASSERT_EQ(unknown.descriptors.size(), 1u);
  EXPECT_TRUE(unknown.descriptors[0].rules.empty());
  EXPECT_TRUE(unknown.checks.empty());

  RequestPlan plan;
  ResolveOptions options;
  options.default_charge = Charge::kAlways;
  options.describe_request = true;
  Resolve(testing::MakeRequest("d", {{{"user", "vip"}}}, 2), shared, options, &plan);
  ASSERT_EQ(plan.checks.size(), 1u);
  EXPECT_EQ(plan.checks[0].params.charge, Charge::kAlways);
  EXPECT_EQ(plan.checks[0].hits, 2u);
  EXPECT_EQ(plan.request_metadata.fields().at("domain").string_value(), "d");
  EXPECT_EQ(plan.request_metadata.fields().at("hitsAddend").number_value(), 2);
}

// Verifies --default_charge_fixed_window applies to fixed-window rules only (upstream's
// environment sets it: upstream has only fixed windows), the other algorithms keep
// --default_charge, and unset it is --default_charge for all.
TEST(ResolveOptionsTest, FixedWindowChargeDefaultIsItsOwn) {
  auto config = LoadConfigText("d.yaml", kConfig);
  ASSERT_TRUE(config.ok()) << config.status();
  std::shared_ptr<const Config> shared(std::move(*config));
  auto charges = [&](const ResolveOptions& options) {
    RequestPlan plan;
    Resolve(testing::MakeRequest("d", {{{"both", "x"}}}), shared, options, &plan);
    std::vector<std::pair<Algorithm, Charge>> out;
    for (const LimitCheck& check : plan.checks) {
      out.emplace_back(check.params.algorithm, check.params.charge);
    }
    return out;
  };
  ResolveOptions upstream;
  upstream.default_charge_fixed_window = Charge::kAlways;
  EXPECT_THAT(charges(upstream),
              ElementsAre(std::make_pair(Algorithm::kFixedWindow, Charge::kAlways),
                          std::make_pair(Algorithm::kSlidingWindowLog, Charge::kIfAdmitted)));
  ResolveOptions always;
  always.default_charge = Charge::kAlways;
  EXPECT_THAT(charges(always),
              ElementsAre(std::make_pair(Algorithm::kFixedWindow, Charge::kAlways),
                          std::make_pair(Algorithm::kSlidingWindowLog, Charge::kAlways)));
  always.default_charge_fixed_window = Charge::kIfAdmitted;
  EXPECT_THAT(charges(always),
              ElementsAre(std::make_pair(Algorithm::kFixedWindow, Charge::kIfAdmitted),
                          std::make_pair(Algorithm::kSlidingWindowLog, Charge::kAlways)));
}

// Verifies an in-flight limit charges always unless its rule says otherwise, whatever
// --default_charge and --default_charge_fixed_window say (Envoy releases denied requests too),
// and that only a release of an in-flight limit marks the plan (RequestPlan::releases_leases):
// an acquisition, or a refund of another algorithm, does not.
TEST(ResolveOptionsTest, InFlightLimitsChargeAlwaysByDefault) {
  auto config = LoadConfigText("c.yaml", R"(domain: c
descriptors:
  - key: streams
    rate_limit: {algorithm: concurrency, unit: minute, requests_per_unit: 3}
  - key: old
    rate_limit: {algorithm: concurrency, unit: minute, requests_per_unit: 3, charge: if_admitted}
  - key: log
    rate_limit: {algorithm: sliding_window_log, unit: minute, requests_per_unit: 3}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  std::shared_ptr<const Config> shared(std::move(*config));
  const auto plan_of = [&](const std::string& key, bool refund, const ResolveOptions& options) {
    auto plan = std::make_unique<RequestPlan>();
    Request request = testing::MakeRequest("c", {{{key, "x"}}});
    request.mutable_descriptors(0)->set_is_negative_hits(refund);
    Resolve(request, shared, options, plan.get());
    return plan;
  };
  for (const Charge fallback : {Charge::kIfAdmitted, Charge::kAlways}) {
    ResolveOptions options;
    options.default_charge = fallback;
    options.default_charge_fixed_window = fallback;
    EXPECT_EQ(plan_of("streams", false, options)->checks[0].params.charge, Charge::kAlways);
    EXPECT_EQ(plan_of("old", false, options)->checks[0].params.charge, Charge::kIfAdmitted);
    EXPECT_EQ(plan_of("log", false, options)->checks[0].params.charge, fallback);
  }
  const ResolveOptions options;
  EXPECT_TRUE(plan_of("streams", true, options)->releases_leases);
  EXPECT_TRUE(plan_of("old", true, options)->releases_leases);
  EXPECT_FALSE(plan_of("streams", false, options)->releases_leases);
  EXPECT_FALSE(plan_of("log", true, options)->releases_leases);
}

// Verifies a request's limit override is enforced in a domain the config does not know (Envoy's
// static limit overrides, envoyproxy/envoy#45622, where upstream ignores it), keyed by that
// domain; a descriptor of that domain without an override still resolves to nothing.
TEST(ResolveOptionsTest, StaticOverrideInAnUnknownDomainIsEnforced) {
  auto config = LoadConfigText("d.yaml", kConfig);
  ASSERT_TRUE(config.ok()) << config.status();
  std::shared_ptr<const Config> shared(std::move(*config));
  Request request = testing::MakeRequest("envoy_only", {{{"user", "u"}}, {{"user", "v"}}});
  auto* limit = request.mutable_descriptors(0)->mutable_limit();
  limit->set_requests_per_unit(1);
  limit->set_unit(envoy::type::v3::MINUTE);
  RequestPlan plan;
  ResolveOptions options;
  options.key_prefix = "rl:";
  Resolve(request, shared, options, &plan);
  ASSERT_EQ(plan.checks.size(), 1u);
  EXPECT_EQ(plan.checks[0].key, "rl:{envoy_only|user=u}fw:60:l1");
  EXPECT_EQ(plan.checks[0].params.limit, 1u);
  EXPECT_EQ(plan.descriptors[0].stat_key, "envoy_only.user_u");
  EXPECT_TRUE(plan.descriptors[1].rules.empty());
}

// Verifies --calendar_months marks fixed-window month rules and month overrides
// (LimitParams::calendar_months), and nothing else.
TEST(ResolveOptionsTest, CalendarMonthsMarkMonthWindows) {
  auto config = LoadConfigText("m.yaml", R"(domain: m
descriptors:
  - key: plan
    rate_limit: {unit: month, requests_per_unit: 1000}
  - key: budget
    rate_limit: {algorithm: token_bucket, unit: month, requests_per_unit: 1000}
  - key: day
    rate_limit: {unit: day, requests_per_unit: 10}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  std::shared_ptr<const Config> shared(std::move(*config));
  Request request = testing::MakeRequest(
      "m", {{{"plan", "p"}}, {{"budget", "b"}}, {{"day", "d"}}, {{"plan", "o"}}});
  auto* limit = request.mutable_descriptors(3)->mutable_limit();
  limit->set_requests_per_unit(5);
  limit->set_unit(envoy::type::v3::MONTH);
  for (bool calendar : {false, true}) {
    RequestPlan plan;
    ResolveOptions options;
    options.calendar_months = calendar;
    Resolve(request, shared, options, &plan);
    ASSERT_EQ(plan.checks.size(), 4u);
    EXPECT_EQ(plan.checks[0].params.calendar_months, calendar);
    EXPECT_FALSE(plan.checks[1].params.calendar_months);  // a token bucket has no windows
    EXPECT_FALSE(plan.checks[2].params.calendar_months);
    EXPECT_EQ(plan.checks[3].params.calendar_months, calendar);
  }
}

}  // namespace
}  // namespace sluice
