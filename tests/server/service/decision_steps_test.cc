// The steps between Resolve and Respond, each on its own: DecideByRule, the over-limit cache step
// and the failure policy, on plans from Resolve and decisions written by hand. No backend.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/failure_reason.h"
#include "server/config/config_loader.h"
#include "server/service/decide_by_rule.h"
#include "server/service/failure_policy.h"
#include "server/service/over_limit_step.h"
#include "server/service/request_validation.h"
#include "server/service/resolve.h"
#include "tests/server/service/request_builder.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

using testing::Entries;

// 20 s into a minute (1,700,000,000 = 28,333,333 minutes and 20 s).
constexpr int64_t kNow = 1'700'000'000'000'000;

constexpr char kConfig[] = R"(domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: bucket
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 100, burst: 3}
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: hour, requests_per_unit: 30, local_share: 0.5}
  - key: budget
    rate_limit: {algorithm: token_bucket, unit: day, requests_per_unit: 1000, burst: 3,
                 charge: always}
  - key: pair
    rate_limits:
      - {algorithm: token_bucket, unit: day, requests_per_unit: 1000, burst: 3, charge: always}
      - {unit: second, requests_per_unit: 2}
)";

std::shared_ptr<const Config> LoadOnce() {
  auto config = LoadConfigText("d.yaml", kConfig);
  EXPECT_TRUE(config.ok()) << config.status();
  return std::shared_ptr<const Config>(std::move(*config));
}

// A plan of `descriptors`, with descriptor i's hits_addend hits[i] (0: unset).
std::unique_ptr<RequestPlan> PlanOf(std::shared_ptr<const Config> config,
                                    const std::vector<Entries>& descriptors,
                                    const std::vector<uint64_t>& hits = {}) {
  auto request = testing::MakeRequest("d", descriptors);
  for (size_t i = 0; i < hits.size(); ++i) {
    if (hits[i] != 0) {
      request.mutable_descriptors(static_cast<int>(i))->mutable_hits_addend()->set_value(hits[i]);
    }
  }
  auto plan = std::make_unique<RequestPlan>();  // a plan is filled where it stays
  Resolve(request, std::move(config), ResolveOptions{}, plan.get());
  return plan;
}

// A plan of `descriptors`, descriptor i with hits_addend hits[i] set (0 included: a check).
std::unique_ptr<RequestPlan> PlanWithHits(std::shared_ptr<const Config> config,
                                          const std::vector<Entries>& descriptors,
                                          const std::vector<uint64_t>& hits) {
  auto request = testing::MakeRequest("d", descriptors);
  for (size_t i = 0; i < hits.size(); ++i) {
    request.mutable_descriptors(static_cast<int>(i))->mutable_hits_addend()->set_value(hits[i]);
  }
  auto plan = std::make_unique<RequestPlan>();
  Resolve(request, std::move(config), ResolveOptions{}, plan.get());
  return plan;
}

// Verifies DecideByRule: a limit of 0 and a request no rule can hold are decided without state;
// what can be admitted is left open; a denial in a group sets the group's other checks to 0 hits.
TEST(DecideByRuleTest, DecidesWhatTheRuleAloneDecides) {
  const std::unique_ptr<RequestPlan> plan_owner = PlanOf(
      LoadOnce(),
      {{{"user", "a"}}, {{"zero", "z"}}, {{"bucket", "b"}}, {{"bucket", "c"}}, {{"both", "x"}}},
      {0, 0, 4, 3, 3});
  RequestPlan& plan = *plan_owner;
  CheckDecisions decisions;
  decisions.Reset(plan.checks.size());
  DecideByRule(plan, decisions, FakeClock(kNow));
  ASSERT_EQ(plan.checks.size(), 6u);
  EXPECT_EQ(decisions.by[0], DecidedBy::kNobody);  // user: 1 of 10
  // A limit of 0: never admitted; its wait is its minute's end (40 s), as upstream's reset.
  EXPECT_EQ(decisions.by[1], DecidedBy::kRule);
  EXPECT_FALSE(decisions.decisions[1].allowed);
  EXPECT_TRUE(decisions.decisions[1].never);
  EXPECT_EQ(decisions.decisions[1].retry_after_us, 40'000'000);
  EXPECT_EQ(decisions.decisions[1].reset_after_us, 40'000'000);
  EXPECT_EQ(decisions.by[2], DecidedBy::kRule);  // 4 > burst 3
  EXPECT_TRUE(decisions.decisions[2].never);
  EXPECT_EQ(decisions.by[3], DecidedBy::kNobody);  // 3 == burst
  // both: 3 > 2 per second can never pass; the hourly rule is asked with 0 hits.
  EXPECT_EQ(decisions.by[4], DecidedBy::kRule);
  EXPECT_EQ(decisions.by[5], DecidedBy::kNobody);
  EXPECT_EQ(plan.checks[5].hits, 0u);
  EXPECT_EQ(plan.checks[3].hits, 3u);
  EXPECT_EQ(decisions.Open(), 3u);
}

// Verifies the cache step answers only lone open checks it knows, learns only the backend's
// denials of single-rule descriptors, and forgets everything when the config changes.
TEST(OverLimitStepTest, AnswersLoneChecksLearnsBackendDenialsForgetsOnNewConfig) {
  FakeClock clock(1700006400000000);
  OverLimitCache cache(clock, 100);
  OverLimitStep step(&cache);
  std::shared_ptr<const Config> config = LoadOnce();
  const std::unique_ptr<RequestPlan> plan_owner =
      PlanOf(config, {{{"user", "a"}}, {{"both", "x"}}});
  RequestPlan& plan = *plan_owner;
  CheckDecisions decisions;
  decisions.Reset(plan.checks.size());
  step.Answer(plan, decisions);
  EXPECT_EQ(decisions.Open(), 3u);  // nothing known yet
  decisions.decisions = {Decision{false, 0, 5'000'000, 5'000'000, 0},
                         Decision{false, 0, 1'000'000, 1'000'000, 0},
                         Decision{true, 29, 0, 1, 0}};
  decisions.by = {DecidedBy::kBackend, DecidedBy::kBackend, DecidedBy::kBackend};
  step.Learn(plan, decisions);
  EXPECT_EQ(cache.size(), 1u);  // "both" has two rules: never remembered

  decisions.Reset(plan.checks.size());
  step.Answer(plan, decisions);
  EXPECT_EQ(decisions.by[0], DecidedBy::kCache);
  EXPECT_EQ(decisions.decisions[0].retry_after_us, 5'000'000);
  EXPECT_EQ(decisions.by[1], DecidedBy::kNobody);

  decisions.Reset(plan.checks.size());
  decisions.decisions[0] = Decision{false, 0, 1, 1, 0};
  decisions.by[0] = DecidedBy::kLocal;
  step.Learn(plan, decisions);  // a local denial is not remembered

  const std::unique_ptr<RequestPlan> next_owner = PlanOf(LoadOnce(), {{{"user", "a"}}});
  RequestPlan& next = *next_owner;  // a new config snapshot
  CheckDecisions fresh;
  fresh.Reset(next.checks.size());
  step.Answer(next, fresh);
  EXPECT_EQ(fresh.by[0], DecidedBy::kNobody);
  EXPECT_EQ(cache.size(), 0u);
}

// Verifies DecideByRule on rules that charge always: a request of more hits than such a rule can
// ever hold still goes to the backend (to be charged), marked for a `never` answer; in a group
// denied by the rule, the checks that charge always keep their hits, the others get 0.
TEST(DecideByRuleTest, ChargedChecksReachTheBackend) {
  const std::unique_ptr<RequestPlan> plan_owner =
      PlanWithHits(LoadOnce(), {{{"budget", "a"}}, {{"pair", "p"}}}, {700, 3});
  RequestPlan& plan = *plan_owner;
  ASSERT_EQ(plan.checks.size(), 3u);
  EXPECT_EQ(plan.checks[0].params.charge, Charge::kAlways);
  CheckDecisions decisions;
  decisions.Reset(plan.checks.size());
  DecideByRule(plan, decisions, FakeClock(kNow));
  EXPECT_EQ(decisions.by[0], DecidedBy::kNobody);  // 700 > burst 3, charged all the same
  EXPECT_EQ(plan.checks[0].hits, 700u);
  EXPECT_TRUE(plan.charges_never_admitted);
  // pair: 3 > 2 per second can never pass: the group is denied; the bucket, which charges
  // always, keeps its 3 hits.
  EXPECT_EQ(decisions.by[1], DecidedBy::kNobody);
  EXPECT_EQ(plan.checks[1].hits, 3u);
  EXPECT_EQ(decisions.by[2], DecidedBy::kRule);
  EXPECT_TRUE(decisions.decisions[2].never);

  const std::unique_ptr<RequestPlan> fits = PlanWithHits(LoadOnce(), {{{"budget", "a"}}}, {3});
  CheckDecisions open;
  open.Reset(fits->checks.size());
  DecideByRule(*fits, open, FakeClock(kNow));
  EXPECT_EQ(open.by[0], DecidedBy::kNobody);
  EXPECT_FALSE(fits->charges_never_admitted);
}

// Verifies the cache step on a rule that charges always: a denied report (hits > 0) is neither
// learned nor answered, since it must be charged; a denied check (hits 0) is learned, and
// answers later checks until the debt is repaid, never reports.
TEST(OverLimitStepTest, ChargedRuleAnswersOnlyChecks) {
  FakeClock clock(1700006400000000);
  OverLimitCache cache(clock, 100);
  OverLimitStep step(&cache);
  std::shared_ptr<const Config> config = LoadOnce();
  const std::unique_ptr<RequestPlan> report = PlanWithHits(config, {{{"budget", "a"}}}, {700});
  const std::unique_ptr<RequestPlan> check = PlanWithHits(config, {{{"budget", "a"}}}, {0});
  CheckDecisions decisions;
  decisions.Reset(1);
  step.Answer(*report, decisions);  // as a call does, before its backend
  decisions.decisions[0] = Decision{false, 0, 5'000'000, 9'000'000, 0};
  decisions.by[0] = DecidedBy::kBackend;
  step.Learn(*report, decisions);
  EXPECT_EQ(cache.size(), 0u);  // a charged denial says nothing about when a check passes

  decisions.decisions[0] = Decision{false, 0, 2'000'000, 9'000'000, 0};
  step.Learn(*check, decisions);
  EXPECT_EQ(cache.size(), 1u);
  CheckDecisions answered;
  answered.Reset(1);
  step.Answer(*check, answered);
  EXPECT_EQ(answered.by[0], DecidedBy::kCache);
  EXPECT_EQ(answered.decisions[0].retry_after_us, 2'000'000);
  answered.Reset(1);
  step.Answer(*report, answered);
  EXPECT_EQ(answered.by[0], DecidedBy::kNobody);  // reports always reach the backend
  clock.AdvanceMicros(2'000'000);
  answered.Reset(1);
  step.Answer(*check, answered);
  EXPECT_EQ(answered.by[0], DecidedBy::kNobody);  // repaid: Redis decides again
}

// Verifies the failure policy: allow and deny leave the checks open for Respond; local decides
// them in process on the replica's share (local_share overrides the hint), keeping what was
// decided before; an argument error is decided locally whatever the mode.
TEST(FailurePolicyTest, LocalDecidesOpenChecksOnTheReplicaShare) {
  FakeClock clock(1700006400000000);
  FailurePolicy policy("test", clock, /*replicas_hint=*/2, MemoryBackendOptions{});
  std::shared_ptr<const Config> config = LoadOnce();
  const absl::Status down = absl::UnavailableError("down");

  const std::unique_ptr<RequestPlan> plan_owner = PlanOf(config, {{{"user", "a"}}});
  RequestPlan& plan = *plan_owner;
  CheckDecisions decisions;
  decisions.Reset(plan.checks.size());
  EXPECT_EQ(policy.Apply(down, plan, decisions), FailureMode::kAllow);
  EXPECT_EQ(decisions.Open(), 1u);

  int admitted = 0;
  for (int i = 0; i < 8; ++i) {
    const std::unique_ptr<RequestPlan> local_owner = PlanOf(config, {{{"user", "b"}}});
    RequestPlan& local = *local_owner;
    local.failure_mode = FailureMode::kLocal;
    CheckDecisions d;
    d.Reset(local.checks.size());
    EXPECT_EQ(policy.Apply(down, local, d), FailureMode::kLocal);
    EXPECT_EQ(d.by[0], DecidedBy::kLocal);
    admitted += d.decisions[0].allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 5);  // 10 a minute over 2 replicas

  const std::unique_ptr<RequestPlan> both_owner = PlanOf(config, {{{"both", "x"}}});
  RequestPlan& both = *both_owner;
  CheckDecisions d;
  d.Reset(both.checks.size());
  d.decisions[0] = Decision{false, 0, 7, 7, 0};
  d.by[0] = DecidedBy::kRule;
  const absl::Status refused = WithFailureReason(absl::InternalError("ERR sluice"),
                                                 FailureReason::kArgument);
  EXPECT_EQ(policy.Apply(refused, both, d), FailureMode::kLocal);
  EXPECT_EQ(d.by[0], DecidedBy::kRule);  // kept
  EXPECT_EQ(d.by[1], DecidedBy::kLocal);
  EXPECT_EQ(both.checks[1].params.limit, 15u);  // local_share 0.5 of 30, not 1/2 by the hint
}

// Verifies the validation step names the offending field, and builds no message for a valid
// request.
TEST(RequestValidationTest, NamesTheOffendingField) {
  const RequestLimits limits{.max_descriptors = 2, .max_entries = 2, .max_key_bytes = 8};
  const auto error = [&](const envoy::service::ratelimit::v3::RateLimitRequest& r) {
    return std::string(ValidateRequest(r, limits).message());
  };
  EXPECT_TRUE(ValidateRequest(testing::MakeRequest("d", {{{"k", "v"}}}), limits).ok());
  EXPECT_EQ(error(testing::MakeRequest("", {{{"k", "v"}}})), "domain must not be empty");
  EXPECT_EQ(error(testing::MakeRequest("d", {})), "descriptors must not be empty");
  EXPECT_EQ(error(testing::MakeRequest("d", {{{"k", "v"}}, {{"k", "v"}}, {{"k", "v"}}})),
            "too many descriptors: 3 (at most 2)");
  EXPECT_EQ(error(testing::MakeRequest("d", {{{"k", "v"}}, {{"a", "1"}, {"b", "2"}, {"c", "3"}}})),
            "descriptors[1]: too many entries: 3 (at most 2)");
  EXPECT_EQ(error(testing::MakeRequest("d", {{{"k", "v"}, {"", "v"}}})),
            "descriptors[0].entries[1].key must not be empty");
  EXPECT_EQ(error(testing::MakeRequest("d", {{{"k", "123456789"}}})),
            "descriptors[0].entries[0].value is 9 bytes (at most 8)");
  EXPECT_EQ(error(testing::MakeRequest("domain-too-long", {{{"k", "v"}}})),
            "domain is 15 bytes (at most 8)");
  auto bad_unit = testing::MakeRequest("d", {{{"k", "v"}}});
  bad_unit.mutable_descriptors(0)->mutable_limit()->set_unit(
      static_cast<envoy::type::v3::RateLimitUnit>(9));
  EXPECT_EQ(error(bad_unit),
            "descriptors[0].limit.unit must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR "
            "(got 9)");
}

// Verifies a refund (Envoy 1.38's is_negative_hits) makes refund checks with its hits, that
// DecideByRule never denies one (a limit of 0 is answered allowed, more hits than the rule holds
// go to the backend to be given back), and that a group's denial leaves a refund's hits alone;
// and that --refuse_refunds names the first refund of a refused domain and plans nothing.
TEST(DecideByRuleTest, RefundsAreNeverDeniedByTheRule) {
  auto request = testing::MakeRequest(
      "d", {{{"user", "a"}}, {{"zero", "z"}}, {{"bucket", "b"}}, {{"pair", "p"}}});
  for (int i = 0; i < 4; ++i) {
    request.mutable_descriptors(i)->set_is_negative_hits(i != 0);
    request.mutable_descriptors(i)->mutable_hits_addend()->set_value(i == 0 ? 1 : 5);
  }
  RequestPlan plan;
  Resolve(request, LoadOnce(), ResolveOptions{}, &plan);
  ASSERT_EQ(plan.checks.size(), 5u);
  EXPECT_FALSE(plan.checks[0].refund);
  for (size_t c = 1; c < 5; ++c) {
    EXPECT_TRUE(plan.checks[c].refund) << c;
    EXPECT_EQ(plan.checks[c].hits, 5u) << c;
  }
  CheckDecisions decisions;
  decisions.Reset(plan.checks.size());
  DecideByRule(plan, decisions, FakeClock(kNow));
  EXPECT_EQ(decisions.by[1], DecidedBy::kRule);  // limit 0: nothing to give back
  EXPECT_TRUE(decisions.decisions[1].allowed);
  EXPECT_EQ(decisions.decisions[1].reset_after_us, 40'000'000);
  EXPECT_EQ(decisions.by[2], DecidedBy::kNobody);  // 5 > burst 3: given back all the same
  EXPECT_EQ(decisions.by[3], DecidedBy::kNobody);  // pair: 5 > 2 per second, still a refund
  EXPECT_EQ(decisions.by[4], DecidedBy::kNobody);
  EXPECT_EQ(plan.checks[4].hits, 5u);

  ResolveOptions refuse;
  refuse.refuse_refunds_in = {"d"};
  RequestPlan refused;
  Resolve(request, LoadOnce(), refuse, &refused);
  EXPECT_EQ(refused.refused_refund, 1);
  EXPECT_TRUE(refused.checks.empty());
  refuse.refuse_refunds_in = {"other"};
  RequestPlan elsewhere;
  Resolve(request, LoadOnce(), refuse, &elsewhere);
  EXPECT_EQ(elsewhere.refused_refund, -1);
  EXPECT_EQ(elsewhere.checks.size(), 5u);
}

}  // namespace
}  // namespace sluice
