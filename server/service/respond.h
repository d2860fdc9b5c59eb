// The last step of a decision: the plan and the decisions its checks got become the Envoy RLS v3
// response, with what the metrics should count. Per descriptor, the most restrictive decision
// made is shown (a request that can never pass, else the longest wait, else the least
// remaining); a descriptor the backend could not decide (and nothing denied) is answered by the
// failure mode; the overall code follows envoyproxy/ratelimit (OVER_LIMIT if a descriptor not in
// quota mode is over, or every quota-mode one is), then --shadow_mode; headers (retry-after,
// RateLimit-*, the IETF draft's) and dynamic metadata as configured. Pure (no I/O, no metrics:
// the counts come back in a ResponseAccount); thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/algorithm/algorithm.h"
#include "server/config/failure_mode.h"
#include "server/service/metrics.h"
#include "server/service/request_plan.h"

namespace sluice {

struct RespondOptions {
  // A rule's hits past this share of its capacity count as near_limit.
  double near_limit_ratio = 0.8;
  // Every request over limit is answered OK; statuses still say OVER_LIMIT.
  bool global_shadow_mode = false;
  // Every descriptor is in quota mode.
  bool global_quota_mode = false;
  // The dynamic metadata carries the request and the `metadata` of the descriptors that passed.
  bool response_dynamic_metadata = false;
  // RateLimit-Limit / -Remaining / -Reset headers of the descriptor closest to its limit.
  bool rate_limit_headers = false;
  std::string limit_header = "RateLimit-Limit";
  std::string remaining_header = "RateLimit-Remaining";
  std::string reset_header = "RateLimit-Reset";
  // RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers) of the same
  // descriptor.
  bool ietf_rate_limit_headers = false;
  // A retry-after header (whole seconds, rounded up) on OVER_LIMIT, unless no wait helps.
  bool retry_after_header = true;
  // --request_all_or_nothing: a request answered OVER_LIMIT consumes nothing. What its
  // descriptors that passed took from the backend is to be given back
  // (ResponseAccount::give_back), and their statuses say what remains once it is.
  bool request_all_or_nothing = false;
};

// RuleHits (rule_series.h): hits of one request on one rule, with envoyproxy/ratelimit's
// per-rule arithmetic (base_limiter.go): over_limit counts only the hits past the capacity,
// near_limit the hits between near_limit_ratio x capacity and the capacity, shadow_mode as
// over_limit.

// What one response says happened, for the metrics.
struct ResponseAccount {
  // One per descriptor with rules: the algorithm of the rule shown and how the descriptor was
  // answered; unless the failure mode answered it, the rule's stat key (a view into the plan or
  // its config) and the request's hits on it.
  struct Descriptor {
    Algorithm algorithm;
    DecisionOutcome outcome;
    absl::string_view stat_key;
    RuleHits hits;
    // The matched node when stat_key is its full_key (Metrics::CountNode), else null.
    const DescriptorNode* stat_node = nullptr;
  };
  absl::InlinedVector<Descriptor, 8> descriptors;
  // Descriptors answered by each failure mode (allow, deny, local: FailureMode's values).
  std::array<uint32_t, 3> policy_decisions{};
  // --shadow_mode turned an OVER_LIMIT answer into OK.
  bool global_shadow_mode = false;
  // RespondOptions::request_all_or_nothing, on an OVER_LIMIT answer: the checks, by index, whose
  // hits the backend took and must give back (admitted, hits > 0, not a refund, of a rule that
  // does not charge always: such a rule keeps what it charged, admitted or denied).
  absl::InlinedVector<uint32_t, 2> give_back;
};

// Fills *response (empty) and *account (empty) from `plan` and `decisions`. `policy`: the mode
// that answers undecided checks (FailurePolicy::Apply's result; ignored when none is undecided).
// Moves plan.request_metadata into the response's dynamic metadata.
void Respond(RequestPlan& plan, const CheckDecisions& decisions, FailureMode policy,
             const RespondOptions& options,
             envoy::service::ratelimit::v3::RateLimitResponse* response, ResponseAccount* account);

}  // namespace sluice
