// Respond without a backend: plans from Resolve on a small config, decisions written by hand, and
// the response and account they must give.
#include "server/service/respond.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/service/resolve.h"
#include "tests/server/service/request_builder.h"

namespace sluice {
namespace {

using testing::Entries;
using Response = envoy::service::ratelimit::v3::RateLimitResponse;

constexpr char kConfig[] = R"(domain: d
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 10}
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: hour, requests_per_unit: 30}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: beta
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: leaky
    rate_limit: {algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 5}
  - key: free
    rate_limit: {unlimited: true}
)";

Decision Allowed(uint64_t remaining, int64_t reset_us, int64_t delay_us = 0) {
  return Decision{true, remaining, 0, reset_us, delay_us};
}
Decision Denied(int64_t retry_us) { return Decision{false, 0, retry_us, retry_us, 0}; }

std::string Header(const Response& r, const std::string& key) {
  for (const auto& h : r.response_headers_to_add()) {
    if (h.key() == key) {
      return h.value();
    }
  }
  return "(none)";
}

class RespondTest : public ::testing::Test {
 protected:
  // Resolves `descriptors` (with `hits`) into plan_ and readies decisions_ for its checks.
  void Plan(const std::vector<Entries>& descriptors, uint32_t hits = 0) {
    auto config = LoadConfigText("d.yaml", kConfig);
    ASSERT_TRUE(config.ok()) << config.status();
    plan_.emplace();
    Resolve(testing::MakeRequest("d", descriptors, hits),
            std::shared_ptr<const Config>(std::move(*config)), ResolveOptions{}, &*plan_);
    decisions_.Reset(plan_->checks.size());
  }
  void Decide(size_t check, Decision decision, DecidedBy by = DecidedBy::kBackend) {
    decisions_.decisions[check] = decision;
    decisions_.by[check] = by;
  }
  Response Answer(FailureMode policy = FailureMode::kAllow) {
    Response response;
    account_ = ResponseAccount();
    Respond(*plan_, decisions_, policy, options_, &response, &account_);
    return response;
  }

  std::optional<RequestPlan> plan_;  // a plan is filled where it stays: emplaced per test
  CheckDecisions decisions_;
  RespondOptions options_;
  ResponseAccount account_;
};

// Verifies an admitted descriptor: OK, remaining and reset from the decision, the rule shown, and
// its hits counted within the limit; a descriptor without a rule is OK with nothing counted.
TEST_F(RespondTest, AdmittedDescriptorShowsRemainingAndReset) {
  Plan({{{"user", "a"}}, {{"color", "red"}}, {{"free", "x"}}}, 3);
  Decide(0, Allowed(7, 18'000'000));
  const Response r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OK);
  ASSERT_EQ(r.statuses_size(), 3);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 7u);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 18);
  EXPECT_EQ(r.statuses(0).current_limit().name(), "per_user");
  EXPECT_FALSE(r.statuses(1).has_current_limit());
  EXPECT_EQ(r.statuses(2).limit_remaining(), 4294967295u);  // unlimited
  ASSERT_EQ(account_.descriptors.size(), 1u);
  EXPECT_EQ(account_.descriptors[0].stat_key, "d.user");
  EXPECT_EQ(account_.descriptors[0].outcome, DecisionOutcome::kWithinLimit);
  EXPECT_EQ(account_.descriptors[0].hits.total, 3u);
  EXPECT_EQ(account_.descriptors[0].hits.within_limit, 3u);
  EXPECT_EQ(Header(r, "retry-after"), "(none)");
}

// Verifies a denial: OVER_LIMIT, remaining 0, the wait as reset and as retry-after (whole
// seconds, rounded up); a cached denial is counted as such.
TEST_F(RespondTest, DeniedDescriptorCarriesTheWait) {
  Plan({{{"user", "a"}}});
  Decide(0, Denied(1'200'000));
  Response r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(r.statuses(0).duration_until_reset().nanos(), 200'000'000);
  EXPECT_EQ(Header(r, "retry-after"), "2");
  EXPECT_EQ(account_.descriptors[0].outcome, DecisionOutcome::kOverLimit);
  EXPECT_EQ(account_.descriptors[0].hits.over_limit, 1u);

  Decide(0, Denied(500'000), DecidedBy::kCache);
  r = Answer();
  EXPECT_EQ(account_.descriptors[0].outcome, DecisionOutcome::kOverLimitCached);
  EXPECT_EQ(account_.descriptors[0].hits.over_limit_with_local_cache, 1u);
  options_.retry_after_header = false;
  EXPECT_EQ(Header(Answer(), "retry-after"), "(none)");
}

// Verifies a request that can never pass gets no retry-after, even beside one that waits.
TEST_F(RespondTest, NeverAdmittedHasNoRetryAfter) {
  Plan({{{"user", "a"}}, {{"user", "b"}}});
  Decide(0, Denied(3'000'000));
  Decision never = Denied(60'000'000);
  never.never = true;
  Decide(1, never, DecidedBy::kRule);
  const Response r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Header(r, "retry-after"), "(none)");
  EXPECT_EQ(r.statuses(1).duration_until_reset().seconds(), 60);
  EXPECT_EQ(account_.descriptors[1].outcome, DecisionOutcome::kNeverAdmitted);
}

// Verifies the most restrictive of several rules is shown: among denials the longest wait,
// without a denial the least remaining.
TEST_F(RespondTest, MostRestrictiveRuleIsShown) {
  Plan({{{"both", "x"}}});
  Decide(0, Allowed(1, 1'000'000));
  Decide(1, Allowed(25, 3'600'000'000));
  Response r = Answer();
  EXPECT_EQ(r.statuses(0).current_limit().unit(), Response::RateLimit::SECOND);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 1u);
  Decide(0, Denied(400'000));
  Decide(1, Denied(90'000'000));
  r = Answer();
  EXPECT_EQ(r.statuses(0).current_limit().unit(), Response::RateLimit::HOUR);
  EXPECT_EQ(Header(r, "retry-after"), "90");
}

// Verifies undecided descriptors follow the failure mode given (allow: OK; deny: OVER_LIMIT
// with no retry-after, as no wait is known), each counted once, while a denial made without the
// backend stands whatever the mode.
TEST_F(RespondTest, UndecidedDescriptorsFollowTheFailureMode) {
  Plan({{{"user", "a"}}, {{"user", "b"}}});
  Decide(1, Denied(60'000'000), DecidedBy::kRule);
  Response r = Answer(FailureMode::kAllow);
  EXPECT_EQ(r.statuses(0).code(), Response::OK);
  EXPECT_EQ(r.statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(account_.policy_decisions[static_cast<size_t>(FailureMode::kAllow)], 1u);
  EXPECT_EQ(account_.descriptors[0].outcome, DecisionOutcome::kFailurePolicy);
  Plan({{{"user", "a"}}});
  r = Answer(FailureMode::kDeny);
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Header(r, "retry-after"), "(none)");
  EXPECT_EQ(account_.policy_decisions[static_cast<size_t>(FailureMode::kDeny)], 1u);
}

// Verifies quota mode: the request is held only when every quota descriptor is spent, and then
// for the shortest of their waits; --shadow_mode answers OK and says so.
TEST_F(RespondTest, QuotaAndShadowModesDecideTheOverallCode) {
  Plan({{{"quota", "a"}}, {{"quota", "b"}}});
  Decide(0, Denied(5'000'000));
  Decide(1, Allowed(2, 60'000'000));
  EXPECT_EQ(Answer().overall_code(), Response::OK);
  Decide(1, Denied(9'000'000));
  Response r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(Header(r, "retry-after"), "5");
  options_.global_shadow_mode = true;
  r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_TRUE(account_.global_shadow_mode);

  options_.global_shadow_mode = false;
  Plan({{{"beta", "a"}}});
  Decide(0, Denied(1'000'000));
  r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_EQ(r.statuses(0).code(), Response::OK);
  EXPECT_EQ(account_.descriptors[0].outcome, DecisionOutcome::kShadowMode);
  EXPECT_EQ(account_.descriptors[0].hits.shadow_mode, 1u);
}

// Verifies the headers of the descriptor closest to its limit, and a leaky bucket's delay in the
// dynamic metadata.
TEST_F(RespondTest, RateLimitHeadersAndShapingDelay) {
  options_.rate_limit_headers = true;
  options_.ietf_rate_limit_headers = true;
  Plan({{{"user", "a"}}, {{"leaky", "l"}}});
  Decide(0, Allowed(7, 20'000'000));
  Decide(1, Allowed(3, 200'000, 150'000));
  const Response r = Answer();
  EXPECT_EQ(Header(r, "RateLimit-Limit"), "10");
  EXPECT_EQ(Header(r, "RateLimit-Remaining"), "3");
  EXPECT_EQ(Header(r, "RateLimit-Reset"), "1");
  EXPECT_EQ(Header(r, "RateLimit-Policy"), "\"d.leaky\";q=10;w=1");
  EXPECT_EQ(r.dynamic_metadata().fields().at("sluice.delay_ms").number_value(), 150);
}

// Verifies --request_all_or_nothing (upstream's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true,
// envoyproxy/ratelimit#427): a request answered OVER_LIMIT lists what its admitted descriptors
// took from the backend, to give back, and their statuses say what remains once it is; an OK
// request, a failure mode's or the cache's answer, and a shadow-mode denial give nothing back.
TEST_F(RespondTest, Issue427DeniedRequestGivesBackWhatItsOthersTook) {
  options_.request_all_or_nothing = true;
  // [group=bar] 10/minute admitted (7 left after 3 hits) + a denied one.
  Plan({{{"user", "bar"}}, {{"user", "special"}}}, 3);
  Decide(0, Allowed(7, 30'000'000));
  Decide(1, Denied(20'000'000));
  Response r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_THAT(account_.give_back, ::testing::ElementsAre(0u));
  EXPECT_EQ(r.statuses(0).code(), Response::OK);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 10u);  // 7 + 3 given back
  // Both rules of `both` admitted: each given back; the least remaining once they are.
  Plan({{{"both", "x"}}, {{"user", "y"}}}, 1);
  Decide(0, Allowed(1, 1'000'000));
  Decide(1, Allowed(20, 3'600'000'000));
  Decide(2, Denied(5'000'000));
  r = Answer();
  EXPECT_THAT(account_.give_back, ::testing::ElementsAre(0u, 1u));
  EXPECT_EQ(r.statuses(0).limit_remaining(), 2u);
  // An OK request keeps what it took.
  Plan({{{"user", "a"}}, {{"beta", "b"}}}, 1);
  Decide(0, Allowed(5, 1'000'000));
  Decide(1, Denied(1'000'000));  // shadow mode: OK all the same
  r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_TRUE(account_.give_back.empty());
  // Answers that took nothing from the backend give nothing back.
  Plan({{{"user", "a"}}, {{"user", "b"}}, {{"user", "c"}}}, 1);
  Decide(0, Allowed(5, 1'000'000), DecidedBy::kLocal);
  Decide(2, Denied(1'000'000), DecidedBy::kCache);
  r = Answer();
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_TRUE(account_.give_back.empty());
  // Without the option, nothing is given back.
  options_.request_all_or_nothing = false;
  Plan({{{"user", "bar"}}, {{"user", "special"}}}, 3);
  Decide(0, Allowed(7, 30'000'000));
  Decide(1, Denied(20'000'000));
  r = Answer();
  EXPECT_TRUE(account_.give_back.empty());
  EXPECT_EQ(r.statuses(0).limit_remaining(), 7u);
}

}  // namespace
}  // namespace sluice
