#include "server/backend/call_plan.h"

#include <algorithm>

#include "server/backend/script_codec.h"
#include "server/common/std_view.h"
#include "server/key/storage_key.h"
#include "server/key/upstream_key.h"
#include "server/redis/cluster/hash_slot.h"

namespace sluice {

CallPlan PlanCalls(absl::Span<const LimitCheck> checks, int64_t now_us, CallPlanOptions options) {
  CallPlan plan;
  absl::InlinedVector<bool, 8> planned(checks.size(), false);  // joined an earlier call
  // A lone check: a group of one (groups are runs of equal LimitCheck::group).
  const auto lone = [&](size_t c) {
    return (c == 0 || checks[c - 1].group != checks[c].group) &&
           (c + 1 == checks.size() || checks[c + 1].group != checks[c].group);
  };
  for (size_t i = 0, end = 0; i < checks.size(); i = end) {
    end = i + 1;
    while (end < checks.size() && checks[end].group == checks[i].group) {
      ++end;
    }
    if (planned[i]) {
      continue;
    }
    const LimitCheck& first = checks[i];
    if (end - i > 1) {
      PlannedCall& call = plan.calls.emplace_back();
      call.kind = PlannedCall::Kind::kGroup;
      for (uint32_t c = static_cast<uint32_t>(i); c < end; ++c) {
        call.checks.push_back(c);
      }
      continue;
    }
    if (first.params.limit == 0) {
      PlannedCall& call = plan.calls.emplace_back();
      call.kind = PlannedCall::Kind::kLocal;
      call.checks.push_back(static_cast<uint32_t>(i));
      call.decision = ZeroLimitDecision(first.params, first.refund ? 0 : first.hits, now_us);
      continue;
    }
    if (first.params.algorithm == Algorithm::kFixedWindow) {
      PlannedCall& call = plan.calls.emplace_back();
      call.kind =
          first.refund ? PlannedCall::Kind::kFixedWindowRefund : PlannedCall::Kind::kFixedWindow;
      call.checks.push_back(static_cast<uint32_t>(i));
      call.params = first.params;
      call.partial = first.partial && !first.refund;
      // A give-back of a charge whose window is over gives nothing (LimitCheck::at_us).
      call.hits = RefundsAnEndedWindow(first, now_us) ? 0
                  : first.refund                      ? std::min(first.hits, kMaxChargedHits)
                                                      : WireHits(first.params, first.hits);
      // A rule that can be decided in a group (hash_tag, or beside others on its descriptor)
      // keeps the group's keys when alone too: one rule, one counter.
      call.upstream_key = options.upstream_keys && !first.params.hash_tagged &&
                          !first.params.shares_descriptor &&
                          AppendUpstreamWindowKey(first.key, options.key_prefix, first.params,
                                                  now_us, &call.window_key);
      if (!call.upstream_key) {
        AppendFixedWindowKey(first.key, first.params, now_us, &call.window_key);
      }
      continue;
    }
    if (options.lanes) {
      plan.lane_checks.push_back(static_cast<uint32_t>(i));
      continue;
    }
    PlannedCall& call = plan.calls.emplace_back();
    call.kind = PlannedCall::Kind::kLoneChecks;
    call.checks.push_back(static_cast<uint32_t>(i));
    for (size_t c = i + 1; c < checks.size(); ++c) {
      const LimitCheck& check = checks[c];
      if (!planned[c] && lone(c) && check.params.algorithm == first.params.algorithm &&
          check.params.limit != 0 &&
          (!options.cluster || HashTagOf(StdView(check.key)) == HashTagOf(StdView(first.key)))) {
        planned[c] = true;
        call.checks.push_back(static_cast<uint32_t>(c));
      }
    }
  }
  return plan;
}

}  // namespace sluice
