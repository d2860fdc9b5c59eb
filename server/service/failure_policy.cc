#include "server/service/failure_policy.h"

#include <algorithm>
#include <vector>

#include "server/common/failure_reason.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"

namespace sluice {

FailureMode FailurePolicy::Apply(const absl::Status& status, RequestPlan& plan,
                                 CheckDecisions& decisions) {
  FailureMode mode = plan.failure_mode;
  if (FailureReasonOf(status) == FailureReason::kArgument) {
    SLUICE_LOG_EVERY_SECONDS(ERROR, 10)
        << "backend " << backend_name_ << " refused a call's arguments: " << LogStatus(status)
        << "; deciding its checks in process";
    mode = FailureMode::kLocal;
  } else {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "backend " << backend_name_ << " could not decide ("
        << FailureReasonName(FailureReasonOf(status)) << "): " << LogStatus(status)
        << "; answering by failure_mode=" << FailureModeName(mode);
  }
  if (mode == FailureMode::kLocal) {
    DecideLocally(plan, decisions);
  }
  return mode;
}

void FailurePolicy::GiveBackLocally(const LimitCheck& check, std::optional<double> local_share,
                                    uint64_t hits) {
  LimitCheck release = check;
  release.params = local_.Scale(check.params, local_share);
  release.hits = hits;
  release.group = 0;
  Decision ignored;
  local_.Decide(absl::MakeConstSpan(&release, 1), absl::MakeSpan(&ignored, 1));
}

void FailurePolicy::DecideLocally(RequestPlan& plan, CheckDecisions& decisions) {
  // Each undecided check, scaled to this replica's share of its rule, keeps its key and group.
  size_t undecided = 0;
  for (const DescriptorPlan& descriptor : plan.descriptors) {
    for (size_t r = 0; r < descriptor.rules.size(); ++r) {
      const size_t c = descriptor.first_check + r;
      if (decisions.by[c] == DecidedBy::kNobody) {
        LimitParams& params = plan.checks[c].params;
        params = local_.Scale(params, descriptor.rules[r]->local_share);
        ++undecided;
      }
    }
  }
  if (undecided == 0) {
    return;
  }
  // A request this replica's share can never hold may still fit the shared limit once the
  // backend is back: say one period, not the algorithm's "never" answer (0 on a fresh key).
  const auto decided = [&](size_t c) {
    decisions.by[c] = DecidedBy::kLocal;
    Decision& d = decisions.decisions[c];
    const LimitCheck& check = plan.checks[c];
    if (!d.allowed && !CanEverAdmit(check.params, check.hits)) {
      d.retry_after_us = std::max(d.retry_after_us, check.params.period_us);
      d.reset_after_us = std::max(d.reset_after_us, d.retry_after_us);
    }
  };
  if (undecided == plan.checks.size()) {
    local_.Decide(plan.checks, absl::MakeSpan(decisions.decisions));
    for (size_t c = 0; c < plan.checks.size(); ++c) {
      decided(c);
    }
    return;
  }
  // Some checks were decided already (by the rule, or the cache): decide only the others, which
  // must not consume again what the cache already denied. Rare: only then does this allocate.
  std::vector<LimitCheck> subset;
  std::vector<size_t> index;
  subset.reserve(undecided);
  index.reserve(undecided);
  for (size_t c = 0; c < plan.checks.size(); ++c) {
    if (decisions.by[c] == DecidedBy::kNobody) {
      subset.push_back(plan.checks[c]);
      index.push_back(c);
    }
  }
  std::vector<Decision> local(subset.size());
  local_.Decide(subset, absl::MakeSpan(local));
  for (size_t i = 0; i < index.size(); ++i) {
    decisions.decisions[index[i]] = local[i];
    decided(index[i]);
  }
}

}  // namespace sluice
