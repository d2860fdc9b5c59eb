// The table of Envoy's rate_limit_quota cases, run against the model of it
// (client/envoy_quota_model.h): one test per rule of Envoy's source (kEnvoy), and the rules where
// a client following the API text (kApiText) differs. Time is injected: nothing sleeps.
#include "client/envoy_quota_model.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

namespace rlqs = envoy::service::rate_limit_quota::v3;
using envoy::type::v3::RateLimitStrategy;
using Mode = EnvoyBucketView::Mode;

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

rlqs::BucketId Bucket(const std::string& value = "a") {
  return EnvoyQuotaModel::MakeBucketId({{"route", value}});
}

RateLimitStrategy Blanket(RateLimitStrategy::BlanketRule rule) {
  RateLimitStrategy s;
  s.set_blanket_rule(rule);
  return s;
}

RateLimitStrategy TokenBucket(uint32_t max_tokens, uint32_t tokens_per_fill, int64_t seconds,
                              int32_t nanos = 0) {
  RateLimitStrategy s;
  auto* tb = s.mutable_token_bucket();
  tb->set_max_tokens(max_tokens);
  tb->mutable_tokens_per_fill()->set_value(tokens_per_fill);
  tb->mutable_fill_interval()->set_seconds(seconds);
  tb->mutable_fill_interval()->set_nanos(nanos);
  return s;
}

// A response of one assignment for `bucket`; `ttl_s` < 0 leaves the TTL unset.
rlqs::RateLimitQuotaResponse Assign(const rlqs::BucketId& bucket, const RateLimitStrategy& s,
                                    double ttl_s = 60) {
  rlqs::RateLimitQuotaResponse response;
  auto* action = response.add_bucket_action();
  *action->mutable_bucket_id() = bucket;
  auto* assignment = action->mutable_quota_assignment_action();
  *assignment->mutable_rate_limit_strategy() = s;
  if (ttl_s >= 0) {
    const auto d = absl::Seconds(ttl_s);
    const int64_t whole = absl::ToInt64Seconds(d);
    assignment->mutable_assignment_time_to_live()->set_seconds(whole);
    assignment->mutable_assignment_time_to_live()->set_nanos(
        static_cast<int32_t>(absl::ToInt64Nanoseconds(d - absl::Seconds(whole))));
  }
  return response;
}

rlqs::RateLimitQuotaResponse Abandon(const rlqs::BucketId& bucket) {
  rlqs::RateLimitQuotaResponse response;
  auto* action = response.add_bucket_action();
  *action->mutable_bucket_id() = bucket;
  action->mutable_abandon_action();
  return response;
}

class EnvoyQuotaModelTest : public ::testing::Test {
 protected:
  static EnvoyBucketView View(const EnvoyQuotaModel& model, absl::Time now,
                              const rlqs::BucketId& bucket = Bucket()) {
    auto view = model.View(bucket, now);
    EXPECT_TRUE(view.has_value());
    return view.value_or(EnvoyBucketView{});
  }
  // Requests `n` times at `now`; how many were allowed.
  static int Admit(EnvoyQuotaModel& model, int n, absl::Time now,
                   const rlqs::BucketId& bucket = Bucket()) {
    int allowed = 0;
    for (int i = 0; i < n; ++i) {
      allowed += model.OnRequest(bucket, now).allowed ? 1 : 0;
    }
    return allowed;
  }
};

// --- kEnvoy: one test per rule of Envoy's source ---

// Verifies createBucketImpl: the first request of a bucket opens the stream and is reported at
// once, alone, count 1, time_elapsed present and 0 s, with the domain; the next request sends
// nothing.
TEST_F(EnvoyQuotaModelTest, FirstRequestIsReportedAtOnceWithZeroSeconds) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  auto first = model.OnRequest(Bucket(), At(0));
  EXPECT_TRUE(first.allowed);
  EXPECT_TRUE(first.output.new_stream);
  ASSERT_TRUE(first.output.report.has_value());
  const auto& report = *first.output.report;
  EXPECT_EQ(report.domain(), "d");
  ASSERT_EQ(report.bucket_quota_usages_size(), 1);
  const auto& usage = report.bucket_quota_usages(0);
  EXPECT_EQ(usage.bucket_id().bucket().at("route"), "a");
  EXPECT_EQ(usage.num_requests_allowed(), 1u);
  EXPECT_EQ(usage.num_requests_denied(), 0u);
  ASSERT_TRUE(usage.has_time_elapsed());
  EXPECT_EQ(usage.time_elapsed().seconds(), 0);
  EXPECT_EQ(usage.time_elapsed().nanos(), 0);
  EXPECT_EQ(model.NextReportAt(), At(5));  // the report timer starts with the first bucket

  auto second = model.OnRequest(Bucket(), At(0.1));
  EXPECT_FALSE(second.output.report.has_value());
  EXPECT_FALSE(second.output.new_stream);
  // A second bucket is reported at once too, on the same stream.
  auto other = model.OnRequest(Bucket("b"), At(0.2));
  EXPECT_FALSE(other.output.new_stream);
  ASSERT_TRUE(other.output.report.has_value());
  EXPECT_EQ(other.output.report->bucket_quota_usages_size(), 1);
}

// Verifies filter.cc noAssignmentBehaviorShouldAllow: a DENY_ALL no_assignment_behavior denies
// the first request (reported as denied) and the next ones; a token bucket one allows the first.
TEST_F(EnvoyQuotaModelTest, NoAssignmentBehaviorDecidesBeforeAnyAssignment) {
  EnvoyBucketSettings deny;
  deny.no_assignment = Blanket(RateLimitStrategy::DENY_ALL);
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d", deny);
  auto first = model.OnRequest(Bucket(), At(0));
  EXPECT_FALSE(first.allowed);
  ASSERT_TRUE(first.output.report.has_value());
  EXPECT_EQ(first.output.report->bucket_quota_usages(0).num_requests_denied(), 1u);
  EXPECT_EQ(Admit(model, 3, At(1)), 0);

  EnvoyQuotaModel unset(EnvoyQuotaProfile::kEnvoy, "d");  // not configured: ALLOW_ALL
  EXPECT_EQ(Admit(unset, 5, At(0)), 5);
  EXPECT_EQ(View(unset, At(0)).strategy.blanket_rule(), RateLimitStrategy::ALLOW_ALL);
}

// Verifies getUsageFromBucket: time_elapsed is truncated to whole seconds (4.99 s is sent as
// 4 s, no nanos) and the counters restart after each report.
TEST_F(EnvoyQuotaModelTest, TickTruncatesElapsedToWholeSeconds) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  Admit(model, 7, At(2));
  auto tick = model.Tick(At(4.99));
  ASSERT_TRUE(tick.report.has_value());
  const auto& usage = tick.report->bucket_quota_usages(0);
  EXPECT_EQ(usage.time_elapsed().seconds(), 4);
  EXPECT_EQ(usage.time_elapsed().nanos(), 0);
  EXPECT_EQ(usage.num_requests_allowed(), 7u);
  auto next = model.Tick(At(9.98));
  EXPECT_EQ(next.report->bucket_quota_usages(0).time_elapsed().seconds(), 4);
  EXPECT_EQ(next.report->bucket_quota_usages(0).num_requests_allowed(), 0u);
  EXPECT_EQ(model.NextReportAt(), At(9.98) + absl::Seconds(5));
}

// Verifies buildReports: every tick reports every bucket held, zero usage included, in one
// message with the domain; a tick with no bucket left still sends an empty message.
TEST_F(EnvoyQuotaModelTest, TickReportsEveryBucketAndEmptyTicksAreSent) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket("a"), At(0));
  model.OnRequest(Bucket("b"), At(0));
  Admit(model, 3, At(1), Bucket("a"));
  auto tick = model.Tick(At(5));
  ASSERT_TRUE(tick.report.has_value());
  EXPECT_EQ(tick.report->domain(), "d");
  ASSERT_EQ(tick.report->bucket_quota_usages_size(), 2);
  EXPECT_EQ(tick.report->bucket_quota_usages(1).num_requests_allowed(), 0u);  // "b": idle

  model.OnResponse(Abandon(Bucket("a")), At(6));
  model.OnResponse(Abandon(Bucket("b")), At(6));
  auto empty = model.Tick(At(10));
  ASSERT_TRUE(empty.report.has_value());
  EXPECT_EQ(empty.report->domain(), "d");
  EXPECT_EQ(empty.report->bucket_quota_usages_size(), 0);
}

// Verifies onRemoteClose + onSendReportsTimer + sendUsageReportImpl: after the server ends the
// stream a new bucket's immediate report is dropped (its count lost), and the next tick opens a
// new stream and sends the domain on it.
TEST_F(EnvoyQuotaModelTest, EndedStreamIsReopenedAtTheNextTick) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket("a"), At(0));
  model.OnStreamClosed();
  EXPECT_FALSE(model.stream_open());
  auto created = model.OnRequest(Bucket("b"), At(1));
  EXPECT_FALSE(created.output.new_stream);  // only the first bucket ever opens the stream
  EXPECT_FALSE(created.output.report.has_value());
  EXPECT_EQ(model.dropped_reports(), 1u);
  auto tick = model.Tick(At(5));
  EXPECT_TRUE(tick.new_stream);
  ASSERT_TRUE(tick.report.has_value());
  EXPECT_EQ(tick.report->domain(), "d");
  ASSERT_EQ(tick.report->bucket_quota_usages_size(), 2);
  EXPECT_EQ(tick.report->bucket_quota_usages(1).num_requests_allowed(), 0u);  // "b": lost
  EXPECT_EQ(tick.report->bucket_quota_usages(1).time_elapsed().seconds(), 4);
}

// Verifies onQuotaResponseImpl: an action without a bucket id, or for a bucket not held, is
// skipped and creates nothing.
TEST_F(EnvoyQuotaModelTest, ActionsForUnknownBucketsAreSkipped) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket("a"), At(0));
  model.OnResponse(Assign(Bucket("zz"), Blanket(RateLimitStrategy::DENY_ALL)), At(1));
  model.OnResponse(Assign(rlqs::BucketId(), Blanket(RateLimitStrategy::DENY_ALL)), At(1));
  EXPECT_EQ(model.skipped_actions(), 2u);
  EXPECT_FALSE(model.HasBucket(Bucket("zz")));
  EXPECT_EQ(Admit(model, 2, At(1), Bucket("a")), 2);
}

// Verifies the abandon action: the bucket is erased, and the next request creates it again
// with a new immediate report of that one request at 0 s.
TEST_F(EnvoyQuotaModelTest, AbandonErasesAndTheNextRequestRecreates) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::DENY_ALL)), At(1));
  EXPECT_EQ(Admit(model, 1, At(1)), 0);
  model.OnResponse(Abandon(Bucket()), At(2));
  EXPECT_FALSE(model.HasBucket(Bucket()));
  auto again = model.OnRequest(Bucket(), At(3));
  EXPECT_TRUE(again.allowed);  // back to no_assignment_behavior
  EXPECT_FALSE(again.output.new_stream);
  ASSERT_TRUE(again.output.report.has_value());
  EXPECT_EQ(again.output.report->bucket_quota_usages(0).num_requests_allowed(), 1u);
  EXPECT_EQ(again.output.report->bucket_quota_usages(0).time_elapsed().seconds(), 0);
  EXPECT_EQ(View(model, At(3)).mode, Mode::kNoAssignment);
}

// Verifies onQuotaResponseImpl: requests_per_time_unit and an assignment without a strategy are
// skipped (`continue`): the bucket keeps its action, its limiter and its expiry time.
TEST_F(EnvoyQuotaModelTest, UnsupportedStrategiesKeepThePreviousAction) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 1), 30), At(1));
  Admit(model, 4, At(1));
  RateLimitStrategy rpu;
  rpu.mutable_requests_per_time_unit()->set_requests_per_time_unit(1000);
  model.OnResponse(Assign(Bucket(), rpu, 60), At(1));
  model.OnResponse(Assign(Bucket(), RateLimitStrategy(), 60), At(1));
  EXPECT_EQ(model.skipped_actions(), 2u);
  const EnvoyBucketView view = View(model, At(1));
  EXPECT_TRUE(view.strategy.has_token_bucket());
  ASSERT_TRUE(view.token_bucket.has_value());
  EXPECT_NEAR(view.token_bucket->tokens, 6, 1e-6);
  EXPECT_EQ(view.expires_at, At(31));  // the TTL of the kept assignment, not restarted
}

// Verifies the blanket rules (shouldAllowRequest): ALLOW_ALL admits and DENY_ALL denies every
// request, counted as allowed and denied in the next report.
TEST_F(EnvoyQuotaModelTest, BlanketRulesDecideEveryRequest) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::DENY_ALL)), At(0));
  EXPECT_EQ(Admit(model, 3, At(1)), 0);
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL)), At(1));
  EXPECT_EQ(Admit(model, 2, At(2)), 2);
  auto tick = model.Tick(At(5));
  EXPECT_EQ(tick.report->bucket_quota_usages(0).num_requests_denied(), 3u);
  EXPECT_EQ(tick.report->bucket_quota_usages(0).num_requests_allowed(), 2u);
}

// Verifies the token bucket decision (AtomicTokenBucketImpl::consume(1, false)): a new bucket
// starts full, each request takes a whole token, and tokens come back at the fill rate.
TEST_F(EnvoyQuotaModelTest, TokenBucketConsumesOneTokenPerRequest) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(3, 2, 1)), At(0));  // 2/s, 3 max
  EXPECT_EQ(Admit(model, 5, At(0)), 3);
  EXPECT_EQ(Admit(model, 5, At(0.75)), 1);  // 1.5 tokens back
  EXPECT_NEAR(View(model, At(0.75)).token_bucket->tokens, 0.5, 1e-6);
  EXPECT_EQ(Admit(model, 5, At(10)), 3);  // capped at max_tokens
}

// Verifies createTokenBucketFromAction's rate: tokens_per_fill / whole seconds of fill_interval
// (ToInt64Seconds); under 1 s that divides by 0, an infinite rate that never runs dry; an unset
// tokens_per_fill reads as 0 (the 1-token-a-year floor).
TEST_F(EnvoyQuotaModelTest, FillRateUsesWholeSecondsOfTheInterval) {
  const EnvoyQuotaRules envoy = EnvoyQuotaRules::For(EnvoyQuotaProfile::kEnvoy);
  EXPECT_DOUBLE_EQ(EnvoyQuotaModel::FillRate(TokenBucket(10, 10, 2, 500000000).token_bucket(),
                                             envoy),
                   5.0);  // 10 / 2, not 10 / 2.5
  EXPECT_TRUE(std::isinf(
      EnvoyQuotaModel::FillRate(TokenBucket(10, 10, 0, 500000000).token_bucket(), envoy)));
  RateLimitStrategy unset_fill = TokenBucket(10, 0, 1);
  unset_fill.mutable_token_bucket()->clear_tokens_per_fill();
  EXPECT_DOUBLE_EQ(EnvoyQuotaModel::FillRate(unset_fill.token_bucket(), envoy), 0.0);

  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(2, 1, 0, 500000000)), At(0));
  EXPECT_EQ(Admit(model, 100, At(0)), 100);
  model.OnResponse(Assign(Bucket(), unset_fill), At(1));
  const EnvoyBucketView view = View(model, At(1));
  EXPECT_NEAR(view.token_bucket->fill_rate, 1.0 / (365 * 24 * 60 * 60), 1e-15);
}

// Verifies protoTokenBucketsEq: an assignment that changes only fill_interval.seconds keeps the
// old token bucket (its rate and its tokens), even though the rate Envoy would compute changed.
TEST_F(EnvoyQuotaModelTest, TokenBucketWithOnlySecondsChangedIsNotReplaced) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 1)), At(0));
  Admit(model, 5, At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 2)), At(0));
  const EnvoyBucketView view = View(model, At(0));
  EXPECT_DOUBLE_EQ(view.token_bucket->fill_rate, 10.0);
  EXPECT_NEAR(view.token_bucket->tokens, 5, 1e-6);
  // The assignment itself is the new one.
  EXPECT_EQ(view.last_action->quota_assignment_action()
                .rate_limit_strategy()
                .token_bucket()
                .fill_interval()
                .seconds(),
            2);
}

// Verifies shouldReplaceTokenBucket + createTokenBucketFromAction: a change of max_tokens,
// tokens_per_fill or fill_interval.nanos builds a new bucket whose start follows the old one's
// fraction as Envoy computes it (whole tokens of max * fraction), handed to AtomicTokenBucketImpl
// as `bool init_fill`: full when that is 1 or more, empty when 0. The comment's intent (kFraction)
// starts it with those whole tokens.
TEST_F(EnvoyQuotaModelTest, ChangedTokenBucketIsReplacedFromTheOldFraction) {
  struct Case {
    const char* name;
    EnvoyQuotaRules::NewTokens new_tokens;
    int consumed;  // of the first bucket's 10
    RateLimitStrategy next;
    double fill_rate;
    double tokens;
  };
  using NT = EnvoyQuotaRules::NewTokens;
  const Case cases[] = {
      {"max_tokens, 30% left: 4 whole tokens, init_fill: full", NT::kInitFillFromFraction, 7,
       TokenBucket(15, 10, 1), 10, 15},
      {"max_tokens, 30% left, as the comment means: 4", NT::kFraction, 7, TokenBucket(15, 10, 1),
       10, 4},
      {"tokens_per_fill, drained: 0 tokens, empty", NT::kInitFillFromFraction, 10,
       TokenBucket(10, 4, 1), 4, 0},
      {"fill_interval.nanos, 50% left: 7 whole tokens, full", NT::kInitFillFromFraction, 5,
       TokenBucket(15, 10, 1, 1), 10, 15},
      {"fill_interval.nanos, 50% left, as the comment means: 7", NT::kFraction, 5,
       TokenBucket(15, 10, 1, 1), 10, 7},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EnvoyQuotaRules rules = EnvoyQuotaRules::For(EnvoyQuotaProfile::kEnvoy);
    rules.new_tokens = c.new_tokens;
    EnvoyQuotaModel model(rules, "d");
    model.OnRequest(Bucket(), At(0));
    model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 1)), At(0));
    EXPECT_EQ(Admit(model, c.consumed, At(0)), c.consumed);
    model.OnResponse(Assign(Bucket(), c.next), At(0));
    const EnvoyBucketView view = View(model, At(0));
    ASSERT_TRUE(view.token_bucket.has_value());
    EXPECT_DOUBLE_EQ(view.token_bucket->fill_rate, c.fill_rate);
    EXPECT_NEAR(view.token_bucket->tokens, c.tokens, 1e-6);
  }
}

// Verifies that a token bucket after a blanket rule, or after the default action, starts full
// (no existing limiter: the blanket rule's CachedBucket is built without one).
TEST_F(EnvoyQuotaModelTest, TokenBucketAfterBlanketRuleStartsFull) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 1)), At(0));
  Admit(model, 10, At(0));
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL)), At(0));
  EXPECT_FALSE(View(model, At(0)).token_bucket.has_value());
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 1)), At(0));
  EXPECT_NEAR(View(model, At(0)).token_bucket->tokens, 10, 1e-6);
}

// Verifies startActionExpirationTimer: the TTL is assignment_time_to_live's whole seconds; 1.9 s
// expires after 1 s, and 0 s (or unset) at once, back to no_assignment_behavior; every applied
// action restarts the TTL.
TEST_F(EnvoyQuotaModelTest, TtlIsWholeSecondsAndZeroExpiresAtOnce) {
  EnvoyBucketSettings settings;
  settings.no_assignment = Blanket(RateLimitStrategy::DENY_ALL);
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d", settings);
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), 1.9), At(0));
  EXPECT_EQ(Admit(model, 1, At(0.99)), 1);
  EXPECT_EQ(Admit(model, 1, At(1.0)), 0);
  EXPECT_EQ(View(model, At(1)).mode, Mode::kNoAssignment);
  EXPECT_TRUE(View(model, At(1)).last_action.has_value());  // kept for inspection

  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), 0), At(2));
  EXPECT_EQ(Admit(model, 1, At(2)), 0);
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), -1), At(3));
  EXPECT_EQ(Admit(model, 1, At(3)), 0);

  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), 5), At(4));
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), 5), At(8));
  EXPECT_EQ(Admit(model, 1, At(12.5)), 1);  // restarted at 8 s: expires at 13 s
  EXPECT_EQ(Admit(model, 1, At(13)), 0);
}

// Verifies onActionExpirationTimer with expired_assignment_behavior.fallback_rate_limit: the
// fallback applies for the timeout's whole seconds (onFallbackExpirationTimer), then the default.
TEST_F(EnvoyQuotaModelTest, FallbackThenDefaultAfterExpiry) {
  EnvoyBucketSettings settings;
  settings.no_assignment = Blanket(RateLimitStrategy::ALLOW_ALL);
  settings.expired_fallback = Blanket(RateLimitStrategy::DENY_ALL);
  settings.expired_timeout = absl::Seconds(3.5);
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d", settings);
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(100, 100, 1), 2), At(0));
  EXPECT_EQ(Admit(model, 1, At(1)), 1);
  EXPECT_EQ(Admit(model, 1, At(2)), 0);  // fallback DENY_ALL from 2 s
  EXPECT_EQ(View(model, At(2)).mode, Mode::kFallback);
  EXPECT_FALSE(View(model, At(2)).token_bucket.has_value());
  EXPECT_EQ(Admit(model, 1, At(4.9)), 0);
  EXPECT_EQ(Admit(model, 1, At(5)), 1);  // 2 s + 3 s (3.5 s in whole seconds): default
  EXPECT_EQ(View(model, At(5)).mode, Mode::kNoAssignment);
}

// Verifies that a token bucket fallback equal to the expired assignment carries its limiter over
// (shouldReplaceTokenBucket in onActionExpirationTimer).
TEST_F(EnvoyQuotaModelTest, EqualTokenBucketFallbackCarriesTheLimiter) {
  EnvoyBucketSettings settings;
  settings.expired_fallback = TokenBucket(10, 10, 1);
  settings.expired_timeout = absl::Seconds(10);
  EnvoyQuotaModel model(EnvoyQuotaProfile::kEnvoy, "d", settings);
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 1), 1), At(0));
  Admit(model, 8, At(0.5));
  model.AdvanceTo(At(1));
  const EnvoyBucketView view = View(model, At(1));
  EXPECT_EQ(view.mode, Mode::kFallback);
  EXPECT_NEAR(view.token_bucket->tokens, 7, 1e-6);  // 2 left + 5 refilled, not a new full one
}

// Verifies that reuse_last_assignment is not implemented by Envoy (the bucket returns to its
// default at expiry) and that the API text's client reuses the assignment for the timeout.
TEST_F(EnvoyQuotaModelTest, ReuseLastAssignmentOnlyInTheApiProfile) {
  EnvoyBucketSettings settings;
  settings.no_assignment = Blanket(RateLimitStrategy::DENY_ALL);
  settings.reuse_last_assignment = true;
  settings.expired_timeout = absl::Seconds(10);
  for (EnvoyQuotaProfile profile : {EnvoyQuotaProfile::kEnvoy, EnvoyQuotaProfile::kApiText}) {
    SCOPED_TRACE(EnvoyQuotaProfileName(profile));
    EnvoyQuotaModel model(profile, "d", settings);
    model.OnRequest(Bucket(), At(0));
    model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), 2), At(0));
    const bool reused = profile == EnvoyQuotaProfile::kApiText;
    EXPECT_EQ(Admit(model, 1, At(3)), reused ? 1 : 0);
    EXPECT_EQ(View(model, At(3)).mode, reused ? Mode::kFallback : Mode::kNoAssignment);
    EXPECT_EQ(Admit(model, 1, At(12)), 0);  // after the timeout, the default for both
  }
}

// Verifies shouldAllowRequest on a token bucket no_assignment_behavior: Envoy has no limiter for
// it (it would crash on the null pointer); the API client builds one.
TEST_F(EnvoyQuotaModelTest, TokenBucketAsNoAssignmentBehavior) {
  EnvoyBucketSettings settings;
  settings.no_assignment = TokenBucket(2, 1, 1);
  EnvoyQuotaModel envoy(EnvoyQuotaProfile::kEnvoy, "d", settings);
  EXPECT_TRUE(envoy.OnRequest(Bucket(), At(0)).allowed);
  EXPECT_FALSE(envoy.envoy_would_crash());
  envoy.OnRequest(Bucket(), At(0));
  EXPECT_TRUE(envoy.envoy_would_crash());

  EnvoyQuotaModel api(EnvoyQuotaProfile::kApiText, "d", settings);
  EXPECT_EQ(Admit(api, 5, At(0)), 3);  // the first without a token, then 2 of 2
  EXPECT_FALSE(api.envoy_would_crash());
}

// --- kApiText: where a client following the API text differs ---

// Verifies the domain: Envoy sets it on every message; the API client on the first message of
// each stream only (again after the stream is reopened).
TEST_F(EnvoyQuotaModelTest, DomainInEveryMessageOrFirstOfStream) {
  for (EnvoyQuotaProfile profile : {EnvoyQuotaProfile::kEnvoy, EnvoyQuotaProfile::kApiText}) {
    SCOPED_TRACE(EnvoyQuotaProfileName(profile));
    EnvoyBucketSettings settings;
    settings.reporting_interval = absl::Seconds(5);
    EnvoyQuotaModel model(profile, "d", settings);
    auto first = model.OnRequest(Bucket(), At(0));
    EXPECT_EQ(first.output.report->domain(), "d");
    auto tick = model.Tick(At(5));
    ASSERT_TRUE(tick.report.has_value());
    EXPECT_EQ(tick.report->domain(), profile == EnvoyQuotaProfile::kEnvoy ? "d" : "");
    model.OnStreamClosed();
    auto reopened = model.Tick(At(10));
    EXPECT_TRUE(reopened.new_stream);
    EXPECT_EQ(reopened.report->domain(), "d");
  }
}

// Verifies the API client's time_elapsed: exact, with nanos (Envoy's: whole seconds).
TEST_F(EnvoyQuotaModelTest, ApiClientSendsExactElapsedTime) {
  EnvoyBucketSettings settings;
  settings.reporting_interval = absl::Milliseconds(4990);
  EnvoyQuotaModel model(EnvoyQuotaProfile::kApiText, "d", settings);
  model.OnRequest(Bucket(), At(0));
  const absl::Time due = kT0 + absl::Milliseconds(4990);
  EXPECT_EQ(model.NextReportAt(), due);
  auto tick = model.Tick(due);
  ASSERT_TRUE(tick.report.has_value());
  EXPECT_EQ(tick.report->bucket_quota_usages(0).time_elapsed().seconds(), 4);
  EXPECT_EQ(tick.report->bucket_quota_usages(0).time_elapsed().nanos(), 990000000);
}

// Verifies per-bucket reporting_interval: the API client reports each bucket on its own
// interval and sends nothing when none is due; Envoy reports all every 5 s whatever they say.
TEST_F(EnvoyQuotaModelTest, PerBucketReportingInterval) {
  EnvoyBucketSettings fast;
  fast.reporting_interval = absl::Seconds(1);
  EnvoyBucketSettings slow;
  slow.reporting_interval = absl::Seconds(3);
  EnvoyQuotaModel api(EnvoyQuotaProfile::kApiText, "d");
  api.OnRequest(Bucket("fast"), fast, At(0));
  api.OnRequest(Bucket("slow"), slow, At(0));
  int fast_reports = 0;
  int slow_reports = 0;
  for (int i = 0; i < 6; ++i) {
    const absl::Time at = api.NextReportAt();
    ASSERT_EQ(at, At(i + 1));
    auto out = api.Tick(at);
    ASSERT_TRUE(out.report.has_value());
    for (const auto& usage : out.report->bucket_quota_usages()) {
      ++(usage.bucket_id().bucket().at("route") == "fast" ? fast_reports : slow_reports);
    }
  }
  EXPECT_EQ(fast_reports, 6);
  EXPECT_EQ(slow_reports, 2);
  EXPECT_FALSE(api.Tick(At(6.5)).report.has_value());  // nothing due

  EnvoyQuotaModel envoy(EnvoyQuotaProfile::kEnvoy, "d");
  envoy.OnRequest(Bucket("fast"), fast, At(0));
  EXPECT_EQ(envoy.NextReportAt(), At(5));
}

// Verifies the API client's token bucket: any field that differs builds a new one, full
// (token_bucket.proto: max_tokens is also the initial level), at the exact fill rate.
TEST_F(EnvoyQuotaModelTest, ApiClientReplacesOnAnyDifferenceAndStartsFull) {
  EnvoyQuotaModel model(EnvoyQuotaProfile::kApiText, "d");
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 1)), At(0));
  Admit(model, 10, At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 2, 500000000)), At(0));
  const EnvoyBucketView view = View(model, At(0));
  EXPECT_DOUBLE_EQ(view.token_bucket->fill_rate, 4.0);  // 10 / 2.5 s
  EXPECT_NEAR(view.token_bucket->tokens, 10, 1e-6);
  // An identical assignment keeps it (a renewal).
  Admit(model, 4, At(0));
  model.OnResponse(Assign(Bucket(), TokenBucket(10, 10, 2, 500000000)), At(0));
  EXPECT_NEAR(View(model, At(0)).token_bucket->tokens, 6, 1e-6);
}

// Verifies the API client's TTL: exact (1.5 s), and an unset TTL never expires.
TEST_F(EnvoyQuotaModelTest, ApiClientTtlIsExactAndUnsetNeverExpires) {
  EnvoyBucketSettings settings;
  settings.no_assignment = Blanket(RateLimitStrategy::DENY_ALL);
  EnvoyQuotaModel model(EnvoyQuotaProfile::kApiText, "d", settings);
  model.OnRequest(Bucket(), At(0));
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), 1.5), At(0));
  EXPECT_EQ(Admit(model, 1, At(1.4)), 1);
  EXPECT_EQ(Admit(model, 1, At(1.5)), 0);
  model.OnResponse(Assign(Bucket(), Blanket(RateLimitStrategy::ALLOW_ALL), -1), At(2));
  EXPECT_EQ(Admit(model, 1, At(1000)), 1);
}

}  // namespace
}  // namespace sluice
