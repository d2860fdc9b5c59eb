// Dividing one global rate between the clients that share it (the Rate Limit Quota Service,
// RLQS: each Envoy enforces locally the share it is assigned). Pure functions; thread-safe.
//
// Max-min fairness (water-filling): a client that asks less than an equal part of what is left
// gets all it asks; the others share the rest equally. When every demand fits, each client also
// gets an equal part of the surplus, so the shares always add up to the limit: a client whose
// demand grows between two rebalances has room at once, and the total admitted stays the limit.
#pragma once

#include <vector>

#include "absl/types/span.h"

namespace sluice::quota {

// The max-min fair shares of `limit` among `demands` (same units, e.g. requests per second), one
// per demand, in order. They sum to `limit` (up to rounding) whenever there is a demand.
// Negative or NaN demands count as 0. REQUIRES: limit >= 0.
std::vector<double> MaxMinShares(double limit, absl::Span<const double> demands);

// Whether a client assigned `assigned` should be sent `fresh`: when they differ by more than
// `tolerance` (a fraction) of the larger, or exactly one of them is 0. Each change sent is a
// message to every Envoy concerned; shares that wobble with measurement noise need not be.
bool ShareMoved(double assigned, double fresh, double tolerance);

}  // namespace sluice::quota
