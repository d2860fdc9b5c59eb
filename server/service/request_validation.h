// The first step of a decision: a request is refused, before any lookup, when it breaks a
// size limit or names something no decision can be made on (no domain, no descriptors, an empty
// key, a limit override with an unknown unit). Pure; thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace sluice {

struct RequestLimits {
  size_t max_descriptors = 64;
  size_t max_entries = 32;
  // Longest domain, descriptor key or descriptor value, in bytes.
  size_t max_key_bytes = 1024;
};

// OK, or kInvalidArgument with a message naming the offending field
// ("descriptors[2].entries[0].key must not be empty").
absl::Status ValidateRequest(const envoy::service::ratelimit::v3::RateLimitRequest& request,
                             const RequestLimits& limits);

}  // namespace sluice
