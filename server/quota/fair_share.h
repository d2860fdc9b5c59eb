// Dividing one global rate between the clients that share it (the Rate Limit Quota Service,
// RLQS: each Envoy enforces locally the share it is assigned). Pure functions; thread-safe.
//
// Max-min fairness (water-filling): a client that asks less than an equal part of what is left
// gets all it asks; the others share the rest equally. When every demand fits, each client also
// gets an equal part of the surplus, so the shares always add up to the limit: a client whose
// demand grows between two rebalances has room at once, and the total admitted stays the limit.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace sluice::quota {

// The max-min fair shares of `limit` among `demands` (same units, e.g. requests per second), one
// per demand, in order. They sum to `limit` (up to rounding) whenever there is a demand.
// Negative or NaN demands count as 0. REQUIRES: limit >= 0.
std::vector<double> MaxMinShares(double limit, absl::Span<const double> demands);

// Whether a client assigned `assigned` should be sent `fresh`: when they differ by more than
// `tolerance` (a fraction) of the larger, or exactly one of them is 0. An Envoy rebuilds its
// local bucket full whenever an assignment changes, so needless changes leak bursts.
bool ShareMoved(double assigned, double fresh, double tolerance);

// The local token bucket that admits about `per_second` requests a second: Envoy's token bucket
// refills `tokens_per_fill` every `fill_interval_s` whole seconds (it divides by whole seconds),
// up to `max_tokens`.
struct LocalBucket {
  uint32_t max_tokens = 1;
  uint32_t tokens_per_fill = 1;
  int64_t fill_interval_s = 1;
};

// The bucket closest to `per_second` with fill_interval_s in [1, kMaxFillIntervalS] and
// tokens_per_fill >= 1: the shortest interval whose rate is within 3% of it, else the closest
// (a longer interval means a larger bucket, which Envoy refills whole on every change);
// max_tokens is `burst` (at least tokens_per_fill). A rate below one request per
// kMaxFillIntervalS gets one token per kMaxFillIntervalS. REQUIRES: per_second > 0.
inline constexpr int64_t kMaxFillIntervalS = 60;
LocalBucket BucketForRate(double per_second, double burst);

}  // namespace sluice::quota
