// Test helpers shared by the decision-path tests: a RateLimitRequest from plain entries, and a
// synchronous decision through a RateLimiter whose backend answers inline (MemoryBackend).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/service/rate_limiter.h"

namespace sluice::testing {

// One descriptor's entries, (key, value) in order.
using Entries = std::vector<std::pair<std::string, std::string>>;

inline RateLimiter::Request MakeRequest(absl::string_view domain,
                                        const std::vector<Entries>& descriptors,
                                        uint32_t hits = 0) {
  RateLimiter::Request r;
  r.set_domain(std::string(domain));
  r.set_hits_addend(hits);
  for (const Entries& d : descriptors) {
    auto* descriptor = r.add_descriptors();
    for (const auto& [k, v] : d) {
      auto* e = descriptor->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
  }
  return r;
}

// REQUIRES: the limiter's backend calls back inline (an error status says it did not).
// `span` (optional): the call's span, as a transport would pass it.
inline absl::StatusOr<RateLimiter::Response> DecideInline(RateLimiter& limiter,
                                                          const RateLimiter::Request& request,
                                                          Span* span = nullptr) {
  RateLimiter::Response response;
  absl::Status result = absl::InternalError("callback never ran");
  limiter.ShouldRateLimit(request, &response, [&](absl::Status s) { result = s; }, span);
  if (!result.ok()) {
    return result;
  }
  return response;
}

}  // namespace sluice::testing
