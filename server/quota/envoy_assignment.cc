#include "server/quota/envoy_assignment.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sluice::quota {

double EnvoyRate(const EnvoyTokenBucket& bucket) {
  // Whole seconds of seconds + nanos; nanos are below a second.
  const int64_t seconds = bucket.fill_seconds + bucket.fill_nanos / 1'000'000'000;
  return seconds > 0 ? static_cast<double>(bucket.tokens_per_fill) / static_cast<double>(seconds)
                     : std::numeric_limits<double>::infinity();
}

bool EnvoyReplaces(const EnvoyTokenBucket& held, const EnvoyTokenBucket& sent) {
  return held.max_tokens != sent.max_tokens || held.tokens_per_fill != sent.tokens_per_fill ||
         held.fill_nanos != sent.fill_nanos;
}

EnvoyTokenBucket EncodeShare(double share, double burst, const EnvoyTokenBucket* previous) {
  constexpr double kMaxTokens = std::numeric_limits<uint32_t>::max();
  EnvoyTokenBucket best;
  double best_error = std::numeric_limits<double>::infinity();
  for (int64_t seconds = 1; seconds <= kMaxFillSeconds; ++seconds) {
    const double exact = share * static_cast<double>(seconds);
    const double tokens = std::min(kMaxTokens, std::max(1.0, std::round(exact)));
    const double error = std::abs(tokens - exact) / exact;
    if (error < best_error) {
      best_error = error;
      best.tokens_per_fill = static_cast<uint32_t>(tokens);
      best.fill_seconds = seconds;
    }
    if (best_error <= kMaxRateError || exact >= kMaxTokens) {
      break;
    }
  }
  best.max_tokens = static_cast<uint32_t>(std::min(kMaxTokens, std::max(1.0, std::round(burst))));
  if (previous != nullptr) {
    // What Envoy compares stays as it was sent: the nanos are kept, so that a renewal of the
    // same share is the same bucket (a nanos that differs would make Envoy replace the bucket,
    // which it starts full), and toggled only to mark a change of seconds alone, which Envoy
    // would otherwise ignore.
    best.fill_nanos = previous->fill_nanos;
    if (best.max_tokens == previous->max_tokens &&
        best.tokens_per_fill == previous->tokens_per_fill &&
        best.fill_seconds != previous->fill_seconds) {
      best.fill_nanos = previous->fill_nanos == 0 ? 1 : 0;
    }
  }
  return best;
}

int64_t AssignmentTtlSeconds(int64_t interval_us, int intervals, int64_t min_seconds) {
  const int64_t us = std::max<int64_t>(0, interval_us) * intervals;
  return std::max(min_seconds, (us + 999'999) / 1'000'000);
}

void FillAssignment(const EnvoyTokenBucket* bucket, bool allow_all, int64_t ttl_seconds,
                    envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse::BucketAction*
                        action) {
  auto* assignment = action->mutable_quota_assignment_action();
  assignment->mutable_assignment_time_to_live()->set_seconds(ttl_seconds);
  auto* strategy = assignment->mutable_rate_limit_strategy();
  if (bucket == nullptr) {
    strategy->set_blanket_rule(allow_all ? envoy::type::v3::RateLimitStrategy::ALLOW_ALL
                                         : envoy::type::v3::RateLimitStrategy::DENY_ALL);
    return;
  }
  auto* token_bucket = strategy->mutable_token_bucket();
  token_bucket->set_max_tokens(bucket->max_tokens);
  token_bucket->mutable_tokens_per_fill()->set_value(bucket->tokens_per_fill);
  token_bucket->mutable_fill_interval()->set_seconds(bucket->fill_seconds);
  token_bucket->mutable_fill_interval()->set_nanos(bucket->fill_nanos);
}

}  // namespace sluice::quota
