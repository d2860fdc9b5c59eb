// How the Redis backend sends one Evaluate call's checks: which Redis calls, carrying which
// checks. Pure (no Redis; the time is an argument): planned apart from the sending so that each
// routing case can be tested on its own (tests/server/backend/call_plan_test.cc). A plan holds
// what reading the replies needs, so it outlives the request's checks.
//
// Groups are runs of checks with one LimitCheck::group; a lone check is a group of one.
//   - A lone check with a limit of 0 is decided here (ZeroLimitDecision): no Redis call.
//   - A lone fixed window runs without a script, as INCRBY + PEXPIRE NX on its window key; a
//     refund of one, as the give_back script on its window key. With upstream keys
//     (CallPlanOptions::upstream_keys), its window key is envoyproxy/ratelimit's
//     (upstream_key.h) and the INCRBY is followed by upstream's EXPIRE instead.
//   - A group of several checks is one call of the group script (all-or-nothing).
//   - The other lone checks run their algorithm's script. With lanes (standalone Redis), they
//     go to their algorithm's lane, to share calls with other requests' checks (lanes.h).
//     Without: each joins the first lone check of its algorithm in the request, on a cluster
//     only if their keys share a hash tag (so a slot), and such a call decides them all with
//     the batch script (one check: the single-key script).
// Calls are in the order of their first check; within a call, checks are in check order.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"

namespace sluice {

struct PlannedCall {
  enum class Kind : uint8_t {
    kLocal,        // decided without Redis: `decision`
    kFixedWindow,  // a lone fixed window: INCRBY + PEXPIRE NX, two replies
    kFixedWindowRefund,  // a lone fixed window's refund: EVALSHA give_back, one reply
    kGroup,        // the group script over every check of one group
    kLoneChecks,   // lone checks of one algorithm: its single-key or batch script
  };
  Kind kind = Kind::kLoneChecks;
  // The checks this call decides, by index in the request, in the order of its replies.
  absl::InlinedVector<uint32_t, 4> checks;
  Decision decision;  // kLocal
  // kFixedWindow, kFixedWindowRefund: the check's limit, its hits as sent (WireHits; a refund's
  // up to kMaxChargedHits), and the key of the window that holds `now`.
  LimitParams params;
  uint64_t hits = 0;
  std::string window_key;
  // window_key is envoyproxy/ratelimit's: INCRBY is followed by EXPIRE of upstream's TTL.
  bool upstream_key = false;
  // kFixedWindow: LimitCheck::partial (a lease call admits the part of its hits that fits).
  bool partial = false;
};

struct CallPlan {
  // The request's own batch, in command order.
  absl::InlinedVector<PlannedCall, 4> calls;
  // Lone checks for the lanes, by index, in check order.
  absl::InlinedVector<uint32_t, 4> lane_checks;
};

struct CallPlanOptions {
  bool lanes = false;    // send lone script checks to their lanes
  bool cluster = false;  // a request's lone checks share a call only within one hash tag
  // A lone fixed window's window key is envoyproxy/ratelimit's, made from its storage key of
  // prefix `key_prefix` (AppendUpstreamWindowKey), so that upstream's replicas on the same
  // Redis count in the same counter; a key it cannot read, and a rule that groups can decide
  // (LimitParams::hash_tagged, shares_descriptor), keep Sluice's window key.
  bool upstream_keys = false;
  absl::string_view key_prefix;
};

// `now_us`: the decision time, which picks a fixed window's window key.
CallPlan PlanCalls(absl::Span<const LimitCheck> checks, int64_t now_us, CallPlanOptions options);

}  // namespace sluice
