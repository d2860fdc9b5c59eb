#include "server/service/unbacked_step.h"

#include <algorithm>

#include "server/common/failure_reason.h"

namespace sluice {

void UnbackedStep::MatchReleases(RequestPlan& plan, const CheckDecisions& decisions) {
  for (const DescriptorPlan& descriptor : plan.descriptors) {
    if (!descriptor.refund) {
      continue;
    }
    for (size_t r = 0; r < descriptor.rules.size(); ++r) {
      const size_t c = descriptor.first_check + r;
      LimitCheck& check = plan.checks[c];
      if (check.params.algorithm != Algorithm::kConcurrency || check.hits == 0 ||
          decisions.by[c] != DecidedBy::kNobody) {
        continue;
      }
      const UnbackedAcquisitions::Taken taken = acquisitions_.Take(check.key, check.hits);
      if (taken.local > 0) {
        policy_.GiveBackLocally(check, descriptor.rules[r]->local_share, taken.local);
      }
      check.hits -= taken.total();
    }
  }
}

void UnbackedStep::Record(const absl::Status& status, FailureMode policy,
                          const RequestPlan& plan, const CheckDecisions& decisions) {
  if (FailureReasonOf(status) == FailureReason::kTimeoutSlow) {
    return;
  }
  const PlanChecks& checks = plan.checks;
  for (size_t i = 0, end = 0; i < checks.size(); i = end) {
    end = i + 1;
    while (end < checks.size() && checks[end].group == checks[i].group) {
      ++end;
    }
    bool concurrency = false;
    // Whether the group was admitted as answered: all-or-nothing, as a backend decides a group
    // (a refund never denies it; a check the failure mode answered is admitted under allow).
    bool admitted = true;
    for (size_t c = i; c < end; ++c) {
      concurrency = concurrency || checks[c].params.algorithm == Algorithm::kConcurrency;
      if (checks[c].refund) {
        continue;
      }
      admitted = admitted && (decisions.by[c] == DecidedBy::kNobody
                                  ? policy == FailureMode::kAllow
                                  : decisions.decisions[c].allowed);
    }
    for (size_t c = i; concurrency && c < end; ++c) {
      const LimitCheck& check = checks[c];
      const DecidedBy by = decisions.by[c];
      if (check.params.algorithm != Algorithm::kConcurrency || check.refund || check.hits == 0 ||
          (by != DecidedBy::kNobody && by != DecidedBy::kLocal) ||
          (!admitted && !ChargesWhenDenied(check.params, check.hits))) {
        continue;
      }
      acquisitions_.Record(check.key, std::min(check.hits, kMaxChargedHits),
                           by == DecidedBy::kLocal, check.params.period_us);
    }
  }
}

}  // namespace sluice
