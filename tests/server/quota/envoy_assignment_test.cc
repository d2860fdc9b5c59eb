#include "server/quota/envoy_assignment.h"

#include <cmath>
#include <optional>
#include <random>

#include "gtest/gtest.h"

namespace sluice::quota {
namespace {

EnvoyTokenBucket Bucket(uint32_t max_tokens, uint32_t per_fill, int64_t seconds,
                        int32_t nanos = 0) {
  EnvoyTokenBucket b;
  b.max_tokens = max_tokens;
  b.tokens_per_fill = per_fill;
  b.fill_seconds = seconds;
  b.fill_nanos = nanos;
  return b;
}

// Verifies the rate Envoy computes, as createTokenBucketFromAction does: tokens_per_fill over the
// fill interval in whole seconds (seconds + nanos, truncated).
TEST(EnvoyAssignmentTest, EnvoyRefillsPerWholeSecondOfTheInterval) {
  const struct {
    EnvoyTokenBucket bucket;
    double rate;
  } cases[] = {
      {Bucket(10, 10, 1), 10},
      {Bucket(5, 100, 10), 10},
      {Bucket(5, 5, 2, 999'999'999), 2.5},  // 2.999999999 s is 2 s to Envoy
      {Bucket(1, 3, 4, 1), 0.75},
  };
  for (const auto& c : cases) {
    EXPECT_DOUBLE_EQ(EnvoyRate(c.bucket), c.rate);
  }
  EXPECT_TRUE(std::isinf(EnvoyRate(Bucket(1, 1, 0, 500'000'000))));  // never sent
}

// Verifies Envoy's comparison (shouldReplaceTokenBucket, protoTokenBucketsEq): max_tokens,
// tokens_per_fill and fill_interval.nanos; a bucket that differs in its seconds only is kept.
TEST(EnvoyAssignmentTest, EnvoyIgnoresAChangeOfSecondsAlone) {
  const EnvoyTokenBucket held = Bucket(3, 3, 2);
  EXPECT_FALSE(EnvoyReplaces(held, Bucket(3, 3, 2)));
  EXPECT_FALSE(EnvoyReplaces(held, Bucket(3, 3, 4)));
  EXPECT_TRUE(EnvoyReplaces(held, Bucket(3, 3, 4, 1)));
  EXPECT_TRUE(EnvoyReplaces(held, Bucket(4, 3, 2)));
  EXPECT_TRUE(EnvoyReplaces(held, Bucket(3, 6, 2)));
}

// Verifies the encoding of a share: the rate Envoy computes is within 0.5% of the share from
// thousands of requests a second down to one every hour (below: one token an hour), the fill
// interval is whole seconds, and the burst is the burst asked (at least one token).
TEST(EnvoyAssignmentTest, TheRateEnvoyComputesIsWithinHalfAPercentOfTheShare) {
  for (double share = 1.0 / 3600; share < 1e6; share *= 1.37) {
    const EnvoyTokenBucket b = EncodeShare(share, share * 2, nullptr);
    EXPECT_GE(b.fill_seconds, 1);
    EXPECT_LE(b.fill_seconds, kMaxFillSeconds);
    EXPECT_EQ(b.fill_nanos, 0);
    EXPECT_GE(b.tokens_per_fill, 1u);
    EXPECT_NEAR(EnvoyRate(b), share, kMaxRateError * share) << share;
    EXPECT_EQ(b.max_tokens, std::max(1.0, std::round(share * 2))) << share;
  }
  // The shortest interval that is exact enough: 26.67/s is 80 every 3 s, not 27 a second.
  const EnvoyTokenBucket third = EncodeShare(80.0 / 3, 26.67, nullptr);
  EXPECT_EQ(third.tokens_per_fill, 80u);
  EXPECT_EQ(third.fill_seconds, 3);
  EXPECT_EQ(third.max_tokens, 27u);
  // Below one token an hour: one token an hour.
  const EnvoyTokenBucket slow = EncodeShare(1e-5, 0.1, nullptr);
  EXPECT_EQ(slow.tokens_per_fill, 1u);
  EXPECT_EQ(slow.fill_seconds, kMaxFillSeconds);
  EXPECT_EQ(slow.max_tokens, 1u);
  // Past what a fill can hold: as many tokens as it can.
  EXPECT_EQ(EncodeShare(1e12, 1e12, nullptr).tokens_per_fill, 4294967295u);
}

// Verifies that Envoy sees every change of share: 1.5/s (3 every 2 s) then 0.75/s (3 every 4 s)
// differ in their seconds only, which Envoy would ignore, so the nanos mark the change (and
// toggle back on the next such change); the rate Envoy computes is unchanged by them.
TEST(EnvoyAssignmentTest, AChangeOnlyInSecondsIsMarkedInTheNanos) {
  const EnvoyTokenBucket first = EncodeShare(1.5, 3, nullptr);
  EXPECT_EQ(first, Bucket(3, 3, 2));
  const EnvoyTokenBucket second = EncodeShare(0.75, 3, &first);
  EXPECT_EQ(second, Bucket(3, 3, 4, 1));
  EXPECT_TRUE(EnvoyReplaces(first, second));
  EXPECT_DOUBLE_EQ(EnvoyRate(second), 0.75);
  const EnvoyTokenBucket third = EncodeShare(1.5, 3, &second);
  EXPECT_EQ(third, Bucket(3, 3, 2, 0));
  EXPECT_TRUE(EnvoyReplaces(second, third));
  // The same share again is the same bucket: Envoy keeps its tokens.
  EXPECT_FALSE(EnvoyReplaces(third, EncodeShare(1.5, 3, &third)));
}

// Verifies what Envoy rebuilds over sequences of EncodeShare (each step given the one before):
// a renewal, the same share and burst again, is the bucket last sent exactly, which Envoy keeps
// with its tokens, also right after a change of seconds alone (marked in the nanos); every real
// change of rate or burst is a bucket Envoy replaces (and starts full or empty).
TEST(EnvoyAssignmentTest, RenewalsKeepWhatEnvoyComparesAndChangesReplace) {
  const struct Step {
    const char* what;
    double share;
    double burst;
    EnvoyTokenBucket sent;
    bool envoy_replaces;  // against the step before
  } steps[] = {
      {"first send", 1.5, 3, Bucket(3, 3, 2, 0), true},
      {"renewal", 1.5, 3, Bucket(3, 3, 2, 0), false},
      {"seconds-only change", 0.75, 3, Bucket(3, 3, 4, 1), true},
      {"renewal after it", 0.75, 3, Bucket(3, 3, 4, 1), false},
      {"renewal again", 0.75, 3, Bucket(3, 3, 4, 1), false},
      {"real change of rate", 10, 3, Bucket(3, 10, 1, 1), true},
      {"renewal after a real change", 10, 3, Bucket(3, 10, 1, 1), false},
      {"change of burst alone", 10, 5, Bucket(5, 10, 1, 1), true},
      {"back to 1.5/s, burst 3", 1.5, 3, Bucket(3, 3, 2, 1), true},
      {"seconds-only change back", 0.75, 3, Bucket(3, 3, 4, 0), true},
      {"renewal after that", 0.75, 3, Bucket(3, 3, 4, 0), false},
  };
  std::optional<EnvoyTokenBucket> previous;
  for (const Step& step : steps) {
    const EnvoyTokenBucket sent =
        EncodeShare(step.share, step.burst, previous ? &*previous : nullptr);
    EXPECT_EQ(sent, step.sent) << step.what;
    EXPECT_EQ(!previous || EnvoyReplaces(*previous, sent), step.envoy_replaces) << step.what;
    EXPECT_NEAR(EnvoyRate(sent), step.share, kMaxRateError * step.share) << step.what;
    previous = sent;
  }
}

// Verifies, over random walks of shares and bursts, that whenever the rate or the burst Envoy
// would apply changes, Envoy's comparison sees the change.
TEST(EnvoyAssignmentTest, EveryChangeOfRateOrBurstReplacesEnvoysBucket) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> log_share(-3, 4);
  for (int walk = 0; walk < 200; ++walk) {
    EnvoyTokenBucket previous = EncodeShare(std::pow(10, log_share(random)), 5, nullptr);
    for (int step = 0; step < 20; ++step) {
      const double share = std::pow(10, log_share(random));
      const double burst = step % 3 == 0 ? 5 : share;
      const EnvoyTokenBucket next = EncodeShare(share, burst, &previous);
      const bool changed =
          EnvoyRate(next) != EnvoyRate(previous) || next.max_tokens != previous.max_tokens;
      if (changed) {
        EXPECT_TRUE(EnvoyReplaces(previous, next)) << share;
      }
      previous = next;
    }
  }
}

// Verifies TTLs in whole seconds (startActionExpirationTimer reads the seconds only), rounded up,
// never below the minimum.
TEST(EnvoyAssignmentTest, TtlIsWholeSecondsRoundedUp) {
  EXPECT_EQ(AssignmentTtlSeconds(5'000'000, 4, 3), 20);
  EXPECT_EQ(AssignmentTtlSeconds(1'200'000, 4, 3), 5);
  EXPECT_EQ(AssignmentTtlSeconds(500'000, 4, 3), 3);
}

// Verifies the actions written: a token bucket with its fields and a TTL of whole seconds; a
// blanket rule otherwise. Never an action Envoy skips (no strategy, requests_per_time_unit).
TEST(EnvoyAssignmentTest, ActionsAlwaysCarryAStrategyEnvoyApplies) {
  envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse::BucketAction action;
  const EnvoyTokenBucket b = Bucket(7, 3, 4, 1);
  FillAssignment(&b, false, 20, &action);
  const auto& assignment = action.quota_assignment_action();
  EXPECT_EQ(assignment.assignment_time_to_live().seconds(), 20);
  EXPECT_EQ(assignment.assignment_time_to_live().nanos(), 0);
  const auto& sent = assignment.rate_limit_strategy().token_bucket();
  EXPECT_EQ(sent.max_tokens(), 7u);
  EXPECT_EQ(sent.tokens_per_fill().value(), 3u);
  EXPECT_EQ(sent.fill_interval().seconds(), 4);
  EXPECT_EQ(sent.fill_interval().nanos(), 1);
  envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse::BucketAction deny;
  FillAssignment(nullptr, false, 8, &deny);
  EXPECT_EQ(deny.quota_assignment_action().rate_limit_strategy().blanket_rule(),
            envoy::type::v3::RateLimitStrategy::DENY_ALL);
  envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse::BucketAction allow;
  FillAssignment(nullptr, true, 8, &allow);
  EXPECT_EQ(allow.quota_assignment_action().rate_limit_strategy().blanket_rule(),
            envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
}

}  // namespace
}  // namespace sluice::quota
