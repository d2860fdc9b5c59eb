// The step of a decision between Resolve and the over-limit cache: the checks that their rule
// alone decides, without any state, are decided here and never reach a backend. A limit of 0
// admits nothing (ZeroLimitDecision), and a request of more hits than its rule can ever hold
// (!CanEverAdmit) is denied whatever the state (NeverAdmittedDecision): no backend is asked
// about either, whatever the hits (a Lua script takes hits below 2^53 only, INCRBY below 2^63).
// The exception is a rule that charges always (Charge::kAlways): its hits are charged even
// though the request cannot pass, so the backend decides it (RateLimiter then marks the denial
// `never`). A group is all-or-nothing, so a check denied here denies its group: the group's
// other checks still go to the backend, with 0 hits, so that they report their state and consume
// nothing; those that charge always keep their hits, which are charged whatever the outcome.
// Pure; thread-safe.
#pragma once

#include "server/service/request_plan.h"

namespace sluice {

// Decides what it can into `decisions` (DecidedBy::kRule), and sets the hits of the other
// checks of a group it denied to 0.
// REQUIRES: `decisions` has one entry per check of `plan`, none decided yet.
void DecideByRule(RequestPlan& plan, CheckDecisions& decisions);

}  // namespace sluice
