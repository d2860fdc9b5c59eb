// Where rate-limit state lives and where decisions are executed. One interface, several
// implementations: MemoryBackend (in process; also the local fallback), RedisBackend
// (standalone and cluster). Implementations are safe for concurrent use from many threads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"
#include "server/algorithm/fixed_window.h"
#include "server/trace/tracer.h"

namespace sluice {

// One limit to check and consume.
struct LimitCheck {
  // Storage key (see storage_key.h); identifies the state this check reads and writes.
  absl::string_view key;
  LimitParams params;
  uint64_t hits = 1;
  // Checks of one batch with the same group are decided together, all-or-nothing: if any of
  // them denies, none of them consumes (the rules of one descriptor form a group). Decisions
  // are still reported per check; the caller treats the group as denied if any check is.
  uint32_t group = 0;
  // A refund (Envoy's is_negative_hits): gives back up to `hits` instead of taking them
  // (sluice::Refund). Never denied; in a group it is applied whatever the group's outcome and
  // never denies the group.
  bool refund = false;
  // A refund of hits this backend charged for this check earlier: the Decision::at_us of that
  // charge, so that a fixed window gives them back to the window that took them, and not at all
  // once that window is over (a later window never holds them). 0: a refund made now (Envoy's).
  // The other algorithms give back at now whatever it says.
  int64_t at_us = 0;
  // A lease call (server/backend/lease_table.h): on the Redis backend a lone fixed window, whose
  // INCRBY of `hits` may pass the limit, admits the part that fits (Decision::granted) and gives
  // back only the rest. Otherwise all or none, as for any check.
  bool partial = false;
};

// Whether a refund of `check` finds the window its hits were charged in over at now_us: a fixed
// window's give-back of a charge made at check.at_us in an earlier window (LimitCheck::at_us).
inline bool RefundsAnEndedWindow(const LimitCheck& check, int64_t now_us) {
  return check.refund && check.at_us != 0 && check.params.algorithm == Algorithm::kFixedWindow &&
         FixedWindowAt(check.params, check.at_us).start_us !=
             FixedWindowAt(check.params, now_us).start_us;
}

// ---- Reading and deleting stored state: the admin API (server/service/admin_service.h), off the
// decision path. Every store answers for the keys its decisions use; nothing here is a decision.

// One key of the store where a check's state lives now, as Inspect found it.
struct StoredKey {
  // The store's own key: the storage key itself, or a window key made from it (server/key/).
  std::string key;
  // What the key is to the check: "state" (the storage key holds the state), "window" (a fixed
  // window's key for the window that holds now, Sluice's layout) or "upstream_window" (the same
  // window in envoyproxy/ratelimit's layout: --redis_key_layout=upstream, memcached).
  std::string role;
  bool exists = false;
  // Milliseconds until the key expires; -1: it has no expiry. 0 when it does not exist.
  int64_t ttl_ms = 0;
  // false: the value there is not this algorithm's state (another algorithm's, or a value of
  // another type), which a decision reads as a fresh key and overwrites.
  bool readable = true;
  // Anything else the reader should know (a sliding window log read in part).
  std::string note;
};

// A check's state as a decision would read it now.
struct StateReport {
  // Every key the check's rule uses now, the one this request's decisions read first (on Redis
  // with --redis_key_layout=upstream a fixed window alone on its descriptor uses upstream's
  // key and one in a group Sluice's: both are listed, and Reset deletes both).
  std::vector<StoredKey> keys;
  // The state the first key holds, decoded into the algorithm's C++ state (server/algorithm/):
  // a fresh state when it is missing, expired or unreadable.
  AlgorithmState state;
  // The time the store decides at, on its clock (Redis': --redis_clock=redis), when it read.
  int64_t now_us = 0;
  // What a check of 0 hits would answer at now_us: the C++ algorithm run on a copy of `state`
  // (sluice::Evaluate); nothing is written.
  Decision answer;
};

// OK with one report per check, in order; or the error and no report.
using InspectCallback = absl::AnyInvocable<void(absl::Status, std::vector<StateReport>) &&>;
// OK with the keys deleted (those that existed), or the error (some keys may be deleted).
using ResetCallback = absl::AnyInvocable<void(absl::Status, std::vector<std::string>) &&>;

// What ReadResets found in the store's reset log since a cursor.
struct ResetLogPage {
  // Where the next read starts.
  std::string cursor;
  // Storage keys reset since the cursor given, oldest first (repeats possible).
  std::vector<std::string> keys;
  // Some reset since the cursor is not in `keys` (the log was trimmed past the cursor, lost, or
  // holds a key too long to log): a reader must forget everything it remembers.
  bool lost = false;
};
using ResetLogCallback = absl::AnyInvocable<void(absl::Status, ResetLogPage) &&>;
using PublishCallback = absl::AnyInvocable<void(absl::Status) &&>;

// Receives the outcome of one Evaluate call. On OK, `decisions` has one entry per check, in
// order, each with its Decision::at_us set. On error (kUnavailable, kDeadlineExceeded, ...), `decisions` is empty and the caller
// applies its failure policy. The span is valid only during the call.
using EvaluateCallback = absl::AnyInvocable<void(absl::Status, absl::Span<const Decision>) &&>;

class Backend {
 public:
  virtual ~Backend() = default;

  // Decides every check in `checks`. Keys, params and hits are copied or consumed before
  // Evaluate returns, so `checks` need only live for the call. `done` runs exactly once, either
  // inline on the caller's stack (memory backend) or later on a backend thread (Redis); it must
  // not block.
  // `trace`: the decision's span, under which a backend that calls out (Redis) records a span
  // per call; inactive when the decision is not traced.
  virtual void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                        EvaluateCallback done) = 0;
  // The same, untraced.
  void Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) {
    Evaluate(checks, TraceParent{}, std::move(done));
  }

  // A short name for logs and /healthz: "memory", "redis", "redis_cluster".
  virtual absl::string_view Name() const = 0;

  // Whether decisions can be made right now (e.g. Redis connections are up); /readyz reports
  // it. Cheap, lock-free and safe from any thread.
  virtual bool Ready() const { return true; }

  // Appends the backend's own metrics, in the Prometheus text format, to *out (served after
  // Metrics' at /metrics). Default: none.
  virtual void AppendMetrics(std::string* /*out*/) const {}

  // ---- The admin API (see StateReport). Neither blocks; `done` runs exactly once, inline or on
  // a backend thread, and must not block. `checks` need only live for the call; their hits,
  // refund and at_us are ignored. Default: kUnimplemented (a store that cannot tell).

  // Reads the state of every check's rule from every key it uses now, without writing.
  virtual void Inspect(absl::Span<const LimitCheck> checks, InspectCallback done);
  // Deletes every key the checks' rules use now (StateReport::keys), so that each decides as a
  // fresh key. Other replicas' over-limit caches learn of it only through PublishResets.
  virtual void Reset(absl::Span<const LimitCheck> checks, ResetCallback done);

  // ---- The reset log: how replicas that share this store, and nothing else, tell each other
  // which storage keys were reset, so that each forgets its over-limit cache's entries for
  // them (server/service/reset_follower.h). A store without one (memory: one replica;
  // memcached: no shared channel) keeps the defaults: not shared, PublishResets does nothing,
  // ReadResets is kUnimplemented.
  virtual bool SharesResets() const { return false; }
  // Appends `storage_keys` to the log as one reset.
  virtual void PublishResets(absl::Span<const std::string> storage_keys, PublishCallback done) {
    std::move(done)(absl::OkStatus());
  }
  // The resets logged after `cursor`; an empty cursor starts a reader: it gets a cursor at the
  // log's end and no keys.
  virtual void ReadResets(const std::string& cursor, ResetLogCallback done);
};

// The defaults: nothing to say.
inline void Backend::Inspect(absl::Span<const LimitCheck>, InspectCallback done) {
  std::move(done)(absl::UnimplementedError(absl::StrCat("the ", Name(),
                                                        " backend cannot inspect its state")),
                  {});
}
inline void Backend::Reset(absl::Span<const LimitCheck>, ResetCallback done) {
  std::move(done)(
      absl::UnimplementedError(absl::StrCat("the ", Name(), " backend cannot reset its state")),
      {});
}
inline void Backend::ReadResets(const std::string&, ResetLogCallback done) {
  std::move(done)(
      absl::UnimplementedError(absl::StrCat("the ", Name(), " backend keeps no reset log")), {});
}

}  // namespace sluice
