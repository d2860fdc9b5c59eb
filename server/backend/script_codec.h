// The wire contract between RedisBackend and Redis (lua/README.md has the whole of it):
//   - the arguments of the Lua scripts, one binary ARGV of little-endian doubles (Redis 7.0
//     spends about 0.3 us per tonumber() of a decimal argument; one struct.unpack costs less
//     than one of them), and their replies, 40 bytes per decision in the same form (a packed
//     string is about 1.5 us cheaper for Redis to return than an array of five integers);
//   - the lone fixed window, which runs without a script as envoyproxy/ratelimit's does:
//     INCRBY <window key> <hits> then PEXPIRE <window key> <ttl> NX, one key per window, the
//     decision made here from the count INCRBY returns (FixedWindowDecision). A denied request's
//     hits are given back right after (the give_back script: DECRBY while the key exists); until
//     then, for one round trip, they count against concurrent requests of the same window, which
//     errs on the side of denying.
//
// Every value a double carries is an integer below 2^53, so it is exact; the scripts reject
// anything else with an error reply rather than decide on a rounded value.
// Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"

namespace sluice {

// Bytes of one check's record in a script's argument and of one decision in a reply.
inline constexpr size_t kScriptCheckBytes = 48;
inline constexpr size_t kScriptDecisionBytes = 40;

// The hits Redis is sent for a check of `hits`: the same, except that a request of more than
// the rule can ever hold (!CanEverAdmit) is sent as Capacity + 1 hits. Every algorithm decides
// that exactly as the real request (denied, whatever the state: the same remaining, retry and
// reset), and it stays in the range a script takes (below 2^53) and INCRBY takes (below 2^63).
// Sluice's decision path never sends such a check of a rule that charges only if admitted
// (DecideByRule decides it first); this keeps every Backend caller safe. A rule that charges
// always is charged what it is asked, so its hits are sent as they are, up to kMaxChargedHits
// (as sluice::Evaluate decides them).
uint64_t WireHits(const LimitParams& params, uint64_t hits);

// The charge field of a script record for a refund (sluice::Refund): the scripts give back up to
// `hits` (sent up to kMaxChargedHits), write the state and answer allowed.
inline constexpr int kRefundCharge = 2;

// ARGV[1] of a single-key script: now, limit, period_us, burst, hits (sent as WireHits), charge
// (params.charge, or kRefundCharge for a refund).
void AppendSingleScriptArgs(int64_t now_us, const LimitParams& params, uint64_t hits,
                            std::string* out, bool refund = false);

// ARGV[1] of the group script: AppendGroupScriptNow once, then AppendGroupScriptCheck per key,
// in key order (algorithm code, limit, period_us, burst, hits as WireHits, charge), with the
// group's one now_us. A fixed window, which has no burst, sends in its place the time from
// now_us to the end of its window (FixedWindowAt: calendar months included).
void AppendGroupScriptNow(int64_t now_us, std::string* out);
void AppendGroupScriptCheck(int64_t now_us, const LimitParams& params, uint64_t hits,
                            std::string* out, bool refund = false);

// Decodes a script's reply of `count` decisions (each allowed, remaining, retry_after_us,
// reset_after_us, delay_us), calling store(i, decision) for each in order, so that a caller
// places them where they belong without a copy. kInternal if the reply is not exactly that: a
// wrong length, or a field that is not an integer in its range (decisions before the bad one
// have been stored).
absl::Status DecodeScriptDecisions(absl::string_view reply, size_t count,
                                   absl::FunctionRef<void(size_t i, const Decision&)> store);
// The same, appending the decisions to *decisions.
absl::Status DecodeScriptDecisions(absl::string_view reply, size_t count,
                                   std::vector<Decision>* decisions);

// The rlqs_exchange script's values (lua/rlqs_exchange.lua): doubles packed little-endian, as
// every script argument. AppendPackedDoubles appends them to *out; ReadPackedDoubles reads whole
// doubles from `packed` (a trailing partial one is ignored).
void AppendPackedDoubles(absl::Span<const double> values, std::string* out);
std::vector<double> ReadPackedDoubles(absl::string_view packed);

// The TTL of a window key written at `now_us`: the rest of the window (FixedWindowAt) in whole
// milliseconds, rounded up (at least 1). REQUIRES: params.period_us > 0.
int64_t FixedWindowTtlMs(const LimitParams& params, int64_t now_us);

// The decision of a lone fixed window whose INCRBY by `hits` returned `count_after`: exactly
// what EvaluateFixedWindow decides for a window that held count_after - hits (a negative count,
// left by hits given back after the key expired, is 0).
// REQUIRES: params.limit > 0 (a limit of 0 never reaches Redis).
Decision FixedWindowDecision(const LimitParams& params, int64_t now_us, uint64_t hits,
                             int64_t count_after);

// What the earlier checks of one batch will give back to their fixed windows, by window key.
// A lone fixed window is charged first (INCRBY) and a denial is given back after the replies
// are read, so a later check of the same window in the same batch (one descriptor twice, or two
// overrides on one upstream key) counted the earlier denied hits: it decides on its count less
// them (Adjusted), as it would had they been given back already, which they will be. Holds
// views of the keys, which must outlive it; a batch's few checks, searched in order.
class WindowGiveBacks {
 public:
  // `count_after` less the hits that earlier denials on `key` will give back.
  int64_t Adjusted(std::string_view key, int64_t count_after) const;
  // A denial on `key` will give back `hits`.
  void Add(std::string_view key, uint64_t hits);

 private:
  absl::InlinedVector<std::pair<std::string_view, uint64_t>, 2> pending_;
};

// The decision of a refund of a lone fixed window whose give_back call left `count_after` (0 for
// a key that was gone): what sluice::Refund answers for a window that holds count_after.
// REQUIRES: params.limit > 0.
Decision FixedWindowRefundDecision(const LimitParams& params, int64_t now_us, int64_t count_after);

}  // namespace sluice
