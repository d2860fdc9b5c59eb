// One ShouldRateLimit call's plan and decisions, handed from step to step of the decision path:
// Resolve fills a RequestPlan (what each request descriptor resolved to, and the checks it
// makes); DecideByRule, the over-limit cache, the backend and the failure policy each decide some
// of the checks into CheckDecisions; Respond reads both. Plain data owned by one call; not
// thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"
#include "server/config/config.h"
#include "server/config/failure_mode.h"

namespace sluice {

// What one request descriptor resolved to.
struct DescriptorPlan {
  // Rules that produce checks, in the node's order, after replaces; empty: no limit applies.
  absl::InlinedVector<const RateLimitRule*, 2> rules;
  // The matched node; null for a request-supplied limit and for no match.
  const DescriptorNode* node = nullptr;
  // The descriptor's hits_addend, else the request's, else 1.
  uint64_t hits = 1;
  // Its checks are RequestPlan::checks[first_check, first_check + rules.size()).
  size_t first_check = 0;
  // Matched an unlimited rule: OK, remaining 2^32 - 1, no limit.
  bool unlimited = false;
  // is_negative_hits: its checks give `hits` back (LimitCheck::refund); always answered OK.
  bool refund = false;
  // Per entry, the share_threshold pattern its value matched (empty when none; the whole vector
  // is empty when no level shares).
  absl::InlinedVector<absl::string_view, 2> shared_patterns;
  // The metrics key: the node's full_key, or one built from the request (detailed_metric,
  // value_to_metric, share_threshold, overrides) held in owned_stat_key. A plan never moves once
  // its descriptors are sized, so the view holds.
  absl::string_view stat_key;
  std::string owned_stat_key;

  bool quota_mode() const { return node != nullptr && node->quota_mode; }
  bool shadow_mode() const { return node != nullptr && node->shadow_mode; }
};

// Most requests carry one or two descriptors with one rule each: their plan and decisions fit in
// the call itself, without an allocation per vector per request. Not more: the call that holds
// them must stay under glibc's large-chunk threshold (rate_limiter.cc).
inline constexpr size_t kInlinePlanChecks = 2;
using PlanChecks = absl::InlinedVector<LimitCheck, kInlinePlanChecks>;

struct RequestPlan {
  RequestPlan() = default;
  // Checks point into `key_bytes`, and descriptor plans into `overrides` and their own stat
  // keys, which may live inside the plan: a plan is filled where it stays.
  RequestPlan(const RequestPlan&) = delete;
  RequestPlan& operator=(const RequestPlan&) = delete;

  // The snapshot the rules live in.
  std::shared_ptr<const Config> config;
  // What answers the checks the backend cannot decide: the domain's mode, else the default.
  FailureMode failure_mode = FailureMode::kAllow;
  // One per request descriptor, in request order.
  absl::InlinedVector<DescriptorPlan, kInlinePlanChecks> descriptors;
  // Rules of request-supplied limits (reserved up front: plans point into it).
  std::vector<RateLimitRule> overrides;
  // One check per rule of each descriptor, in descriptor order. Checks of one group are
  // consecutive (LimitCheck::group).
  PlanChecks checks;
  // The checks' storage keys, back to back (each LimitCheck::key is a view into it): one
  // buffer per request, whatever its number of checks.
  std::string key_bytes;
  // Some check asks more hits than its rule can ever hold yet goes to the backend, to be charged
  // (Charge::kAlways): its denial is marked `never` once decided (RateLimiter).
  bool charges_never_admitted = false;
  // Some check releases an in-flight limit (a refund of `algorithm: concurrency`): it may give
  // back an acquisition this replica answered without the backend (UnbackedStep).
  bool releases_leases = false;
  // The index of the first descriptor with is_negative_hits when --refuse_refunds refuses the
  // domain's refunds (the call is refused whole); -1 otherwise.
  int refused_refund = -1;
  // With response_dynamic_metadata: the request's part of the dynamic metadata, built while the
  // request is alive.
  google::protobuf::Struct request_metadata;
};

// Who decided a check.
enum class DecidedBy : uint8_t {
  kNobody,   // no one yet (after a failed backend call: the failure policy answers)
  kRule,     // the rule alone, before any backend (DecideByRule)
  kCache,    // the over-limit cache
  kBackend,
  kLocal,    // in process, after the backend failed (failure_mode local)
};

// One entry per check of a RequestPlan.
struct CheckDecisions {
  absl::InlinedVector<Decision, kInlinePlanChecks> decisions;
  absl::InlinedVector<DecidedBy, kInlinePlanChecks> by;

  void Reset(size_t checks) {
    decisions.assign(checks, Decision{});
    by.assign(checks, DecidedBy::kNobody);
  }
  // Checks not decided yet.
  size_t Open() const {
    return static_cast<size_t>(std::count(by.begin(), by.end(), DecidedBy::kNobody));
  }
};

}  // namespace sluice
