#include "server/service/decide_by_rule.h"

namespace sluice {

void DecideByRule(RequestPlan& plan, CheckDecisions& decisions) {
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
          decisions.decisions[c] = ZeroLimitDecision(check.params, 0);
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
      decisions.decisions[c] = check.params.limit == 0
                                   ? ZeroLimitDecision(check.params, check.hits)
                                   : NeverAdmittedDecision(check.params);
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
