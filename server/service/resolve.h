// The resolve step of a decision: a validated request and the config snapshot in force become a
// RequestPlan. Each descriptor is matched against its domain's tree as envoyproxy/ratelimit
// matches (exact value, else wildcard in file order, else the key's default; the rule applies
// only at the last entry's level); a request-supplied limit replaces the configured rules, in a
// domain the config does not know too (its key names the domain, counted apart); rules
// the matched ones name in `replaces` are dropped; each remaining rule makes one check with its
// storage key; descriptors whose keys all share one hash tag are co-located into one group.
// Pure (no backend, no clock); thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/config/config.h"
#include "server/config/failure_mode.h"
#include "server/service/request_plan.h"

namespace sluice {

struct ResolveOptions {
  // Prepended to every storage key.
  std::string key_prefix;
  // What answers a descriptor the backend cannot decide, unless its domain sets its own.
  FailureMode failure_mode = FailureMode::kAllow;
  // The LimitParams::charge of the checks of rules that do not set their own (`charge:`),
  // except in-flight limits (`algorithm: concurrency`), which charge always unless they say
  // `charge: if_admitted` (a denied acquisition holds a lease until Envoy's release of it).
  Charge default_charge = Charge::kIfAdmitted;
  // The same for fixed-window rules (--default_charge_fixed_window); unset: default_charge.
  std::optional<Charge> default_charge_fixed_window;
  // Builds RequestPlan::request_metadata (--response_dynamic_metadata).
  bool describe_request = false;
  // --calendar_months: fixed-window month rules and overrides count calendar months
  // (LimitParams::calendar_months).
  bool calendar_months = false;
  // --refuse_refunds: domains whose refunds (is_negative_hits) are refused, or every domain.
  absl::flat_hash_set<std::string> refuse_refunds_in;
  bool refuse_all_refunds = false;
};

// Fills *plan from `request` and `config`. An unknown domain, or a descriptor that matches
// nothing, gets a DescriptorPlan without rules (and no checks). A descriptor with
// is_negative_hits makes refund checks (LimitCheck::refund), and sets plan->releases_leases when
// one releases an in-flight limit; when the options refuse the domain's refunds,
// plan->refused_refund names the first such descriptor and nothing else is planned.
// REQUIRES: `request` passed ValidateRequest; `config` is not null; *plan is empty (as
// default-constructed). `request` need only live for the call: the plan holds no view into it.
void Resolve(const envoy::service::ratelimit::v3::RateLimitRequest& request,
             std::shared_ptr<const Config> config, const ResolveOptions& options,
             RequestPlan* plan);

}  // namespace sluice
