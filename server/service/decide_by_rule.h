// The step of a decision between Resolve and the over-limit cache: the checks that their rule
// alone decides, without any state, are decided here and never reach a backend. A limit of 0
// admits nothing (a check of 0 hits: ZeroLimitDecision), and a request of more hits than its
// rule can ever hold (!CanEverAdmit: any hits under a limit of 0 too) is denied whatever the
// state (NeverAdmittedDecision: no retry-after; a fixed window's reset is its window's end, as
// envoyproxy/ratelimit answers): no backend is asked about either, whatever the hits (a Lua
// script takes hits below 2^53 only, INCRBY below 2^63). Nothing is charged for a limit of 0.
// The exception is a rule that charges always (Charge::kAlways): its hits are charged even
// though the request cannot pass, so the backend decides it (RateLimiter then marks the denial
// `never`). A group is all-or-nothing, so a check denied here denies its group: the group's
// other checks still go to the backend, with 0 hits, so that they report their state and consume
// nothing; those that charge always keep their hits, which are charged whatever the outcome.
// Pure but for reading `clock`; thread-safe.
#pragma once

#include "server/common/clock.h"
#include "server/service/request_plan.h"

namespace sluice {

// Decides what it can into `decisions` (DecidedBy::kRule), and sets the hits of the other
// checks of a group it denied to 0. `clock` places a fixed window's end; it is read only when
// a check is decided here.
// REQUIRES: `decisions` has one entry per check of `plan`, none decided yet.
void DecideByRule(RequestPlan& plan, CheckDecisions& decisions, const Clock& clock);

}  // namespace sluice
