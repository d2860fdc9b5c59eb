#include "server/service/decide_by_rule.h"

namespace sluice {

void DecideByRule(RequestPlan& plan, CheckDecisions& decisions, const Clock& clock) {
  // Read once, and only for a check the rule decides (most requests have none).
  int64_t now_us = -1;
  const auto now = [&] {
    if (now_us < 0) {
      now_us = clock.NowMicros();
    }
    return now_us;
  };
  PlanChecks& checks = plan.checks;
  for (size_t i = 0, end = 0; i < checks.size(); i = end) {
    end = i + 1;
    while (end < checks.size() && checks[end].group == checks[i].group) {
      ++end;
    }
    bool denied = false;
    for (size_t c = i; c < end; ++c) {
      const LimitCheck& check = checks[c];
      if (check.refund) {
        // A refund of any size is applied; of a limit of 0 (no state), answered here.
        if (check.params.limit == 0) {
          decisions.decisions[c] = ZeroLimitDecision(check.params, 0, now());
          decisions.by[c] = DecidedBy::kRule;
        }
        continue;
      }
      if (check.params.limit != 0 && CanEverAdmit(check.params, check.hits)) {
        continue;
      }
      if (ChargesWhenDenied(check.params, check.hits)) {
        plan.charges_never_admitted = true;
        continue;
      }
      if (check.params.limit == 0 && check.hits == 0) {
        decisions.decisions[c] = ZeroLimitDecision(check.params, 0, now());
      } else {
        // A limit of 0 admits no hits ever: never admitted, as more hits than a limit.
        decisions.decisions[c] = NeverAdmittedDecision(check.params, now());
      }
      decisions.by[c] = DecidedBy::kRule;
      denied = denied || !decisions.decisions[c].allowed;
    }
    for (size_t c = i; denied && c < end; ++c) {
      if (!checks[c].refund && !ChargesWhenDenied(checks[c].params, checks[c].hits)) {
        checks[c].hits = 0;
      }
    }
  }
}

}  // namespace sluice
