// A share as Envoy's rate_limit_quota filter applies it: the token bucket and TTL that make an
// Envoy admit the share it is assigned, written for what Envoy's source does with them
// (envoyproxy/envoy source/extensions/filters/http/rate_limit_quota/global_client_impl.cc, 2026),
// which is not all the API comments promise:
//   - createTokenBucketFromAction: the bucket refills continuously at tokens_per_fill divided by
//     the fill interval in WHOLE seconds (absl::ToInt64Seconds of seconds + nanos), up to
//     max_tokens.
//   - shouldReplaceTokenBucket / protoTokenBucketsEq: a token bucket sent again replaces the one
//     Envoy holds only when max_tokens, tokens_per_fill or fill_interval.nanos differ; a change
//     of fill_interval.seconds alone is ignored. A replacement starts full or empty, not with
//     the old bucket's fraction as its comment says: the fraction times max_tokens, a uint64,
//     reaches AtomicTokenBucketImpl's `bool init_fill`, so it starts full whenever a whole token
//     of the new bucket was left, and empty otherwise (full when Envoy held no token bucket).
//   - startActionExpirationTimer: the assignment lives assignment_time_to_live.seconds (nanos
//     ignored; 0 or unset expires it at once).
//   - onQuotaResponseImpl: an assignment with no strategy, or requests_per_time_unit, is skipped
//     (the bucket keeps what it had).
// So every share is a token bucket (or DENY_ALL for nothing) whose whole-second rate is within
// kMaxRateError of it, and whose comparison fields differ from the previous one sent whenever
// its rate or burst does; TTLs are whole seconds. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"

namespace sluice::quota {

// envoy.type.v3.TokenBucket, as sent.
struct EnvoyTokenBucket {
  uint32_t max_tokens = 1;
  uint32_t tokens_per_fill = 1;
  int64_t fill_seconds = 1;
  int32_t fill_nanos = 0;

  bool operator==(const EnvoyTokenBucket& o) const {
    return max_tokens == o.max_tokens && tokens_per_fill == o.tokens_per_fill &&
           fill_seconds == o.fill_seconds && fill_nanos == o.fill_nanos;
  }
  bool operator!=(const EnvoyTokenBucket& o) const { return !(*this == o); }
};

// The largest relative error of the rate Envoy computes against the share asked.
inline constexpr double kMaxRateError = 0.005;
// The longest fill interval sent: a share below one request per this many seconds gets one.
inline constexpr int64_t kMaxFillSeconds = 3600;

// Requests a second Envoy refills `bucket` at (createTokenBucketFromAction).
double EnvoyRate(const EnvoyTokenBucket& bucket);

// Whether Envoy, holding `held`, replaces it when sent `sent` (shouldReplaceTokenBucket).
bool EnvoyReplaces(const EnvoyTokenBucket& held, const EnvoyTokenBucket& sent);

// The token bucket of `share` requests a second and a capacity of `burst` requests, given the
// one last sent (`previous`, null when the last assignment was none or not a token bucket):
//   - fill_seconds: the shortest whole number of seconds in [1, kMaxFillSeconds] at which a
//     whole number of tokens is within kMaxRateError of the share, else the closest;
//   - max_tokens: the burst, rounded, at least 1 (Envoy refills continuously, so the fill does
//     not bound the burst);
//   - fill_nanos: the previous bucket's (0 for the first), toggled between 0 and 1 when the
//     bucket differs from `previous` only in fill_seconds, which Envoy would ignore (1 ns changes
//     no rate: Envoy truncates to seconds). So the same share and burst again give exactly
//     `previous`, which Envoy keeps with its tokens, and a change of either is a bucket Envoy
//     replaces.
// REQUIRES: share > 0.
EnvoyTokenBucket EncodeShare(double share, double burst, const EnvoyTokenBucket* previous);

// An assignment's TTL in whole seconds: `intervals` report intervals of `interval_us` (rounded
// up), at least `min_seconds`.
int64_t AssignmentTtlSeconds(int64_t interval_us, int intervals, int64_t min_seconds);

// Writes into `action` (whose bucket_id the caller sets) an assignment of `bucket` (a token
// bucket), or of the blanket rule ALLOW_ALL / DENY_ALL when `bucket` is null, living ttl_seconds.
void FillAssignment(const EnvoyTokenBucket* bucket, bool allow_all, int64_t ttl_seconds,
                    envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse::BucketAction*
                        action);

}  // namespace sluice::quota
