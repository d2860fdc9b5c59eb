#include "server/service/over_limit_step.h"

namespace sluice {
namespace {

// Whether check `c` is the only undecided check of its group.
bool LoneOpen(const PlanChecks& checks, const CheckDecisions& decisions, size_t c) {
  const auto open = [&](size_t o) { return decisions.by[o] == DecidedBy::kNobody; };
  for (size_t o = c; o-- > 0 && checks[o].group == checks[c].group;) {
    if (open(o)) {
      return false;
    }
  }
  for (size_t o = c + 1; o < checks.size() && checks[o].group == checks[c].group; ++o) {
    if (open(o)) {
      return false;
    }
  }
  return true;
}

}  // namespace

void OverLimitStep::Answer(const RequestPlan& plan, CheckDecisions& decisions) {
  if (cache_ == nullptr) {
    return;
  }
  if (const Config* seen = seen_config_.exchange(plan.config.get()); seen != plan.config.get()) {
    cache_->Clear();
  }
  const PlanChecks& checks = plan.checks;
  for (size_t c = 0; c < checks.size(); ++c) {
    // A check that charges when denied must reach the backend to be charged, and a refund to be
    // applied.
    if (decisions.by[c] != DecidedBy::kNobody || !LoneOpen(checks, decisions, c) ||
        checks[c].refund || ChargesWhenDenied(checks[c].params, checks[c].hits)) {
      continue;
    }
    if (const int64_t wait =
            cache_->DeniedFor(checks[c].key, checks[c].hits, checks[c].params.limit);
        wait > 0) {
      decisions.decisions[c] = Decision{false, 0, wait, wait, 0};
      decisions.by[c] = DecidedBy::kCache;
    }
  }
}

void OverLimitStep::Learn(const RequestPlan& plan, const CheckDecisions& decisions) {
  if (cache_ == nullptr) {
    return;
  }
  for (const DescriptorPlan& descriptor : plan.descriptors) {
    if (descriptor.refund) {
      // The refund's capacity is usable at once here (the cache's other replicas learn nothing).
      for (size_t c = descriptor.first_check; c < descriptor.first_check + descriptor.rules.size();
           ++c) {
        if (decisions.by[c] == DecidedBy::kBackend) {
          cache_->Forget(plan.checks[c].key);
        }
      }
      continue;
    }
    const size_t c = descriptor.first_check;
    // A denial that was charged says when that many hits fit again, not when the debt is
    // repaid; only a check of 0 hits learns that (and answers checks of 0 hits until then).
    // An in-flight limit is not remembered: releases free it at any moment, through any
    // replica, where its retry time is when the oldest lease would lapse.
    if (descriptor.rules.size() == 1 && decisions.by[c] == DecidedBy::kBackend &&
        plan.checks[c].params.algorithm != Algorithm::kConcurrency &&
        !decisions.decisions[c].allowed &&
        !ChargesWhenDenied(plan.checks[c].params, plan.checks[c].hits)) {
      cache_->Remember(plan.checks[c].key, plan.checks[c].hits, plan.checks[c].params.limit,
                       decisions.decisions[c].retry_after_us);
    }
  }
}

}  // namespace sluice
