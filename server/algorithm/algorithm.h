// The six rate-limit algorithms: their parameters, their per-key state and one decision step.
//
// Each algorithm is a pure function of (parameters, state, now, hits): it reads the key's state,
// decides, and writes the new state back. The memory backend runs these functions under a
// per-shard lock; the Lua scripts in lua/ implement the same arithmetic on Redis, and the shared
// cases in tests/cases/ hold both to one behaviour. Nothing here is thread-safe by itself: the
// caller owns the state and serializes access to it.
//
// Conventions shared by every algorithm (and by the Lua scripts):
//   - Time is integer microseconds since the Unix epoch; durations are integer microseconds.
//   - Admission is all-or-nothing: a request of `hits` is admitted whole or not at all, and a
//     denied request leaves the state bit for bit as it was (nothing is consumed, nothing is
//     refilled or rolled over either). An admitted request, hits == 0 included, writes the
//     state as seen at now. The one exception is a rule that charges always (Charge::kAlways,
//     below): there a denied request of hits > 0 is charged like an admitted one, and the state
//     goes past the limit (into debt).
//   - hits == 0 checks the limit without consuming. It goes through the same admission test
//     as any request, so it is admitted when the state is exactly at the limit (e.g. a fixed
//     window with count == limit: count + 0 <= limit), as envoyproxy/ratelimit treats
//     hits_addend 0 (INCRBY 0). It is denied only when the state is beyond the limit (which
//     for GCRA includes a stored arrival time that rounded up past the tolerance; gcra.h).
//   - limit == 0 admits nothing: hits > 0 is denied and hits == 0 admitted, remaining is 0,
//     reset_after and a denial's retry_after are one period; the state is untouched.
//   - Fractional quantities (tokens, water level, GCRA arrival time) are IEEE doubles computed
//     in a fixed order of operations (each algorithm's header spells it out), durations are
//     rounded up to whole microseconds and `remaining` down, so Lua and C++ produce identical
//     bits. Build with -ffp-contract=off: a fused multiply-add would change them.
//   - retry_after and reset_after are exact: the first whole microsecond at which the request
//     is admitted (or the state is fresh again), never one early nor one late. Where rounding
//     can shift the analytic answer, it is corrected by searching whole microseconds around
//     it (algorithm_internal.h). Every reported duration saturates at 2^53 us (285 years).
#pragma once

#include "absl/strings/string_view.h"
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <variant>

namespace sluice {

enum class Algorithm : uint8_t {
  kFixedWindow = 0,
  kSlidingWindowLog = 1,
  kSlidingWindowCounter = 2,
  kTokenBucket = 3,
  kLeakyBucket = 4,
  kGcra = 5,
  // In-flight limit: `limit` acquisitions held at once, each a lease that lapses one period
  // after it was taken unless given back first (a refund releases). It runs the sliding window
  // log (Engine): a lease is a log entry, the period its length; a release drops the newest.
  // Its rules charge always unless they say otherwise (Resolve): a denied acquisition is a lease
  // past the limit, which the release Envoy sends for the denied request gives back.
  kConcurrency = 6,
};
inline constexpr int kAlgorithmCount = 7;

// The algorithm whose arithmetic and state `algorithm` runs on: itself, except concurrency,
// which is the sliding window log (same state, same Lua scripts, same Redis value).
inline constexpr Algorithm Engine(Algorithm algorithm) {
  return algorithm == Algorithm::kConcurrency ? Algorithm::kSlidingWindowLog : algorithm;
}

// "fixed_window", "sliding_window_log", ... as written in the YAML config.
absl::string_view AlgorithmName(Algorithm algorithm);
std::optional<Algorithm> ParseAlgorithm(absl::string_view name);

// Whether a request's hits are charged when it is denied.
enum class Charge : uint8_t {
  // Only an admitted request consumes; a denied one leaves the state as it was. Sluice's
  // default (but for in-flight limits): a client that retries over the limit does not push its
  // own limit further away.
  kIfAdmitted = 0,
  // Every hit asked is charged, admitted or not (envoyproxy/ratelimit's increment-first, and
  // what a usage report after the response needs: the usage happened). The state goes past the
  // limit: the windows count past it; the token bucket's tokens fall below zero, the leaky
  // bucket's level rises above its capacity and GCRA's arrival time moves beyond the burst
  // tolerance. While the state is past the limit even a check of 0 hits is denied, remaining is
  // 0, and retry_after says when the same request would be admitted. What bounds a debt:
  //   - fixed window: the window (the next one starts from 0);
  //   - sliding window log: the period (each charge leaves the log one period after it was made);
  //   - sliding window counter: two windows (a charge weighs on the next window only);
  //   - token bucket, leaky bucket, GCRA: at most one period's limit of debt is kept (tokens
  //     down to -limit, level up to burst + limit, arrival time up to now + tolerance + period),
  //     so a key in debt is out of debt within one period of its last charge.
  // hits above kMaxChargedHits are charged as kMaxChargedHits.
  kAlways = 1,
};

// "if_admitted", "always" as written in the YAML config (`charge:`) and in --default_charge.
absl::string_view ChargeName(Charge charge);
std::optional<Charge> ParseCharge(absl::string_view name);

// The most hits one request charges under Charge::kAlways: the Lua scripts take hits below 2^53,
// and every debt is bounded well before (or, for the windows, only by the window itself).
inline constexpr uint64_t kMaxChargedHits = (uint64_t{1} << 53) - 1;

struct LimitParams {
  Algorithm algorithm = Algorithm::kFixedWindow;
  // Requests admitted per period (windows), or tokens refilled / water drained per period
  // (buckets, GCRA).
  uint64_t limit = 0;
  // Window length, or the refill / drain period. REQUIRES: > 0.
  int64_t period_us = 0;
  // Capacity of the token or leaky bucket, or the burst GCRA tolerates. Ignored by the windows.
  uint64_t burst = 0;
  // Whether a denied request's hits are charged (see Charge). Inside a group (all-or-nothing)
  // a check that charges always is charged whatever the group's outcome; the others consume
  // only when the whole group is admitted.
  Charge charge = Charge::kIfAdmitted;
  // Storage only, never the arithmetic: the rule is one of several on its descriptor
  // (rate_limits). A store whose keys name no rule, as envoyproxy/ratelimit's keys on memcached
  // do (upstream has one rule per descriptor), tells this rule's windows from the others' by
  // their period (server/key/upstream_key.h). Set by the config; false for a request's override.
  bool shares_descriptor = false;
  // Storage only: the rule names a `hash_tag`, so its requests may be co-located, decided by one
  // script call on one Redis Cluster slot. Its counters (as those of a rule beside others on its
  // descriptor, which are always decided together) keep Sluice's keys whatever
  // --redis_key_layout says, so that one rule has one counter whatever the request's shape.
  bool hash_tagged = false;
  // Fixed windows only: the windows are calendar months in UTC, period_us / kMonthUs of them
  // each, starting at 00:00 on the 1st (envoyproxy/ratelimit's USE_CALENDAR_MONTH_RATE_LIMIT,
  // --calendar_months), instead of periods counted from the epoch. Only where a window starts
  // and ends changes (FixedWindowAt, fixed_window.h); the arithmetic is the same. Set by Resolve
  // for fixed-window month rules and month overrides.
  bool calendar_months = false;
};

// The period of a month rule: 30 days, as envoyproxy/ratelimit's UnitToDivider has it.
inline constexpr int64_t kMonthUs = int64_t{30} * 86400 * 1000000;

struct Decision {
  bool allowed = false;
  // How many hits a request could still take right now, after this decision: one of
  // `remaining + 1` hits would be denied and, if remaining > 0, one of `remaining` admitted.
  uint64_t remaining = 0;
  // Denied: how long until this same request (same hits) would be admitted if nothing else
  // arrives. Never earlier than that moment. Allowed: 0.
  int64_t retry_after_us = 0;
  // How long until the limit is fully replenished (state back to a fresh key) if nothing else
  // arrives. Also bounds how long the state must be kept: 0 means the state already decides
  // exactly like a fresh key and may be dropped.
  int64_t reset_after_us = 0;
  // Leaky bucket, allowed: how long the caller should hold this request so that output leaves
  // at the drain rate (the time for the water already queued ahead of it to drain). 0 otherwise.
  int64_t delay_us = 0;
  // The time the decision was made at, on the clock of whoever made it (a backend's, e.g. Redis'
  // with its clock): where a fixed window's charge went, for a give-back of it later
  // (LimitCheck::at_us).
  int64_t at_us = 0;
  // Denied, and no wait can change that: the request asks for more hits than its rule can ever
  // hold (NeverAdmittedDecision), a limit of 0 included. Only the decision path sets it; the
  // algorithms and the
  // backends leave it false (their own answer to such a request is described below).
  bool never = false;
  // Allowed for part of its hits only (LimitCheck::partial): how many. 0: all or none.
  uint64_t granted = 0;
};

// When a request can never be admitted (hits above Capacity), each algorithm's own decision is
// a denial with retry_after_us = reset_after_us, since no wait makes it succeed (on a fresh key
// that is 0). Sluice's decision path never asks an algorithm or a backend that question: it
// answers such a request itself with NeverAdmittedDecision, before any backend.

// ---- State per key, one alternative per algorithm. A default-constructed state is a fresh key.

struct FixedWindowState {
  int64_t window_start_us = 0;  // epoch-aligned: floor(now / period) * period
  uint64_t count = 0;           // hits admitted in that window
};

struct SlidingWindowLogState {
  // (time admitted, hits) of every admission still inside the trailing window, oldest first.
  std::deque<std::pair<int64_t, uint64_t>> entries;
  uint64_t total = 0;  // sum of hits in entries
};

struct SlidingWindowCounterState {
  int64_t window_start_us = 0;  // epoch-aligned start of the current window
  uint64_t current = 0;         // hits admitted in the current window
  uint64_t previous = 0;        // hits admitted in the window before it
};

struct TokenBucketState {
  bool initialized = false;  // a fresh bucket is full
  double tokens = 0;
  int64_t last_us = 0;       // time of the last refill
};

struct LeakyBucketState {
  double level = 0;    // water in the bucket at last_us
  int64_t last_us = 0;
};

struct GcraState {
  double tat_us = 0;  // theoretical arrival time; <= now means a full burst is available
};

using AlgorithmState =
    std::variant<FixedWindowState, SlidingWindowLogState, SlidingWindowCounterState,
                 TokenBucketState, LeakyBucketState, GcraState>;

// A fresh state of the alternative that `algorithm` uses.
AlgorithmState NewState(Algorithm algorithm);

// Runs one decision of params.algorithm at now_us for `hits`, updating `state`. A limit of 0 is
// decided here, once for every algorithm (ZeroLimitDecision); each algorithm's own Evaluate*
// function requires params.limit > 0. Under Charge::kAlways, hits above kMaxChargedHits are
// decided as kMaxChargedHits (as the Lua scripts are sent them).
// REQUIRES: state holds the alternative for params.algorithm (see NewState); params.period_us > 0.
Decision Evaluate(const LimitParams& params, AlgorithmState& state, int64_t now_us,
                  uint64_t hits);

// A refund (Envoy's is_negative_hits): gives back up to `hits` units that earlier requests took
// from the key, at now_us, then answers as a check of 0 hits would on the state it leaves,
// except that a refund is never denied: allowed, retry_after_us 0, delay_us 0. What "give back"
// means is each algorithm's GiveBack* (its header): never past an empty counter or a full
// bucket (nothing is banked for later requests), a debt (Charge::kAlways) is repaid first, and
// a fresh key stays fresh. A limit of 0 keeps no state: ZeroLimitDecision of 0 hits. hits above
// kMaxChargedHits are given back as kMaxChargedHits (as the Lua scripts are sent them).
// REQUIRES: as Evaluate.
Decision Refund(const LimitParams& params, AlgorithmState& state, int64_t now_us, uint64_t hits);

// The decision of every algorithm when params.limit == 0: nothing is ever replenished, so a
// request with hits > 0 is denied and hits == 0 is admitted; remaining is 0. Both retry_after
// (when denied) and reset_after are NoLimitWait, never 0, so that a client told to wait does
// not spin. It needs no state, so a backend decides it without reading or writing any (the
// Redis backend makes no call for it).
Decision ZeroLimitDecision(const LimitParams& params, uint64_t hits, int64_t now_us);

// What a decision that no wait can change reports as its wait (ZeroLimitDecision,
// NeverAdmittedDecision): for a fixed window the rest of the window that holds now_us, when its
// count starts again (what envoyproxy/ratelimit answers for any denial); for the other
// algorithms, which have no windows, one period.
int64_t NoLimitWait(const LimitParams& params, int64_t now_us);

// What a rule can hold at once: its limit for the windows, its burst for the buckets and GCRA.
inline uint64_t Capacity(const LimitParams& params) {
  switch (params.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
    case Algorithm::kGcra:
      return params.burst;
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowLog:
    case Algorithm::kSlidingWindowCounter:
    case Algorithm::kConcurrency:
      break;
  }
  return params.limit;
}

// Whether a request of `hits` could ever be admitted by a rule of `params`, in some state after
// some wait: hits <= Capacity(params), and hits == 0 when the limit is 0 (nothing replenishes).
inline bool CanEverAdmit(const LimitParams& params, uint64_t hits) {
  return hits <= (params.limit == 0 ? 0 : Capacity(params));
}

// Whether deciding a request of `hits` changes the state even when it is denied: a rule that
// charges always, asked for hits > 0, with a limit above 0 (a limit of 0 keeps no state).
inline bool ChargesWhenDenied(const LimitParams& params, uint64_t hits) {
  return params.charge == Charge::kAlways && hits > 0 && params.limit > 0;
}

// The decision for a request that can never be admitted (!CanEverAdmit), made without reading
// or writing any state: denied, `never` set, remaining 0, and retry_after and reset_after
// NoLimitWait, so that a client that ignores `never` and waits does not spin.
Decision NeverAdmittedDecision(const LimitParams& params, int64_t now_us);

}  // namespace sluice
