// Leases for hot keys (RedisBackend, --redis_lease_rate): a replica that decides one key often
// takes units of that key's limit from Redis ahead of time, in one ordinary script call, and
// admits from them in process until they are spent or the lease ends. The units are taken
// before they are admitted, so the limit's upper bound holds across replicas exactly as it does
// per request; what a lease does not use is given back when it ends, so under-admission is
// bounded by the units the replicas hold.
//
// This table is the replica's side of it, with no I/O: the backend asks it first (Admit), sends
// the lease calls and give-backs it names, and tells it what Redis answered (Granted, Refused,
// Observed).
//   - Hotness. Every check's key is counted, lock-free, in a fixed array of kSlots slots (the
//     key's hash picks the slot; a key that finds another in its slot takes it over): decisions
//     in the current tick of kTickUs. A key whose count in one tick reaches
//     hot_rate x kTickUs becomes hot: it gets an entry (a map in kShards shards, each under its
//     own mutex), which counts its own rate from then on, unless its shard holds its part of
//     `max_keys` already. A key that has not been seen for kForgetUs and holds no units is
//     forgotten.
//   - Which checks: token buckets, GCRA, fixed windows and sliding-window counters (periods
//     from the epoch), alone in their request's group, not refunds. A request is decided from
//     leases only when every one of its checks is, so that a request is decided in one place; otherwise it goes to Redis whole (its keys' leases are untouched,
//     their units stay taken).
//   - Size. A lease is `window` of the key's rate on this replica, at most `max_share` of the
//     key's remaining budget (the last thing Redis said of it: a decision, a grant or a
//     refusal) divided by the replicas (`replicas`), so that the replicas together hold at most
//     that share; a fixed window's or sliding-window counter's, at most what this rate uses
//     before the window ends. Under 2 units it is not worth a call: the key is decided per
//     request, and its next Redis answer sizes the next try. A lease is topped up when it falls
//     under half its size, one call in flight per key.
//   - End. A lease's units are given back `life` after its last grant (the first decision of
//     this replica after that time ends it: the table has no thread), or when a config reload
//     changes the key's rule, or a reset deletes its state (Forget). A fixed window's or
//     sliding-window counter's lease also ends with the window it was taken in (the grant's
//     Decision::at_us, when its call was planned): its units count in that window only, and
//     what is left when the window is over is not given back (WindowEnded). A grant for a
//     later window than the units held drops those.
//   - Answers from a lease: allowed, remaining = what Redis said remained after the grant plus
//     the units still held here (other replicas' use since is not seen), reset = Redis' reset
//     at the grant less the time since (approximate: the lease's units are already counted in
//     it).
//
// Thread-safe: Admit may run on any thread at once; the hotness slots are atomics, each entry
// is under its shard's mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"
#include "server/common/mutex.h"

namespace sluice {

struct LeaseOptions {
  // Decisions a second of one key on this replica that make it hot. 0: no leases.
  double hot_rate = 0;
  // A lease is this long of the key's rate on this replica.
  absl::Duration window = absl::Milliseconds(20);
  // Units unused this long after a lease's last grant are given back.
  absl::Duration life = absl::Milliseconds(100);
  // The replicas together hold at most this share of a key's remaining budget.
  double max_share = 0.5;
  // Sluice replicas sharing the Redis (--replicas_hint).
  int replicas = 1;
  // Hot keys tracked at most (entries, each a key and its lease), kShards shards of an equal
  // part: clients choose the keys, so the table is bounded whatever they send. A key that finds
  // its shard full is decided per request. 16,384 keys each at least `hot_rate` is several
  // million decisions a second on one replica: far past what one replica serves.
  size_t max_keys = 16384;
};

// A lease call to send: decide `hits` of `params` on `key` (a check of the key's rule that
// charges only if admitted), and report the answer with Granted or Refused.
struct LeaseAsk {
  std::string key;
  LimitParams params;
  uint64_t hits = 0;
};

// Units to give back to `key` (a refund check of `hits`), unused by a lease that ended; `at_us`
// is its last grant's time (LimitCheck::at_us: a fixed window's units go back to their window).
struct LeaseReturn {
  std::string key;
  LimitParams params;
  uint64_t hits = 0;
  int64_t at_us = 0;
};

struct LeaseCounters {
  uint64_t taken = 0;          // grants
  uint64_t refused = 0;        // lease calls denied (the budget was short)
  uint64_t units_granted = 0;
  uint64_t units_returned = 0;  // given back, Redis said OK
  // Not given back: the give-back failed (lost to the limit until they refill); a window's
  // units left when it ended (WindowEnded), or that a grant for a later window dropped; units
  // of a reset key (Forget).
  uint64_t units_expired = 0;
  uint64_t decisions = 0;       // checks decided from a lease
};

class LeaseTable {
 public:
  // Indexes of a request's checks whose keys are hot (inline: no allocation per request).
  using Tracked = absl::InlinedVector<size_t, 4>;

  static constexpr size_t kSlots = 4096;
  static constexpr size_t kShards = 16;
  static constexpr int64_t kTickUs = 100'000;
  static constexpr int64_t kForgetUs = 2'000'000;

  explicit LeaseTable(LeaseOptions options);
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  bool enabled() const { return options_.hot_rate > 0; }

  // Counts `checks` at `now_us` (the decision clock) and, when every one is leasable and its
  // key holds the units it asks for, takes them and writes `decisions`: true. Otherwise takes
  // nothing and writes nothing: false. Either way appends the lease calls now due for these
  // checks' keys to `asks` (each then in flight until Granted or Refused) and the units of
  // ended leases to `returns`. When it returns false, `tracked` lists the checks (indexes) whose
  // keys are hot, for Observed.
  bool Admit(absl::Span<const LimitCheck> checks, int64_t now_us, absl::Span<Decision> decisions,
             std::vector<LeaseAsk>* asks, std::vector<LeaseReturn>* returns,
             Tracked* tracked);

  // What Redis decided for a hot key's check (rule `params`) that went to Redis (the request
  // was not decided here): its remaining budget sizes the key's next lease.
  void Observed(absl::string_view key, const LimitParams& params, const Decision& decision);
  // The answer to a lease call: admitted (the units are this replica's now: all it asked for,
  // or Decision::granted of them) or not (none taken; its remaining sizes the next). A failed
  // call: Refused with nullptr.
  void Granted(const LeaseAsk& ask, const Decision& decision, int64_t now_us);
  void Refused(const LeaseAsk& ask, const Decision* decision);
  // The outcome of a give-back.
  void Returned(const LeaseReturn& give_back, bool ok);
  // Whether `give_back`'s units were granted in a window that is over at `now_us` (a fixed
  // window's or a sliding-window counter's): they cannot go back, a later window never held them.
  // A sliding-window counter's give-back is applied to the window of the script's now, so one
  // sent then would take them from the wrong window; they weigh in the next window's estimate
  // as the previous window's count, as admissions would have. Counted as expired (Returned).
  static bool WindowEnded(const LeaseReturn& give_back, int64_t now_us);
  // The state behind `storage_key` was reset (the admin API, here or through the reset log):
  // the leases of every key it is, or begins with (a fixed window's window keys), drop their
  // units without giving them back, and so does a grant in flight for them. A give-back would
  // count against the fresh state what was taken from the old one (a window's count could fall
  // below what it has admitted since the reset). ForgetAll: every key (a reset log that lost
  // entries, or one that reset everything).
  void Forget(absl::string_view storage_key);
  void ForgetAll();

  LeaseCounters counters() const;
  // Units held now, in all, and hot keys tracked (walk every shard: for metrics and tests).
  uint64_t units_held() const;
  size_t keys() const;
  void AppendMetrics(std::string* out) const;

 private:
  struct Entry {
    LimitParams params;
    uint64_t units = 0;
    int64_t ends_us = 0;
    int64_t granted_at_us = 0;  // the last grant's Decision::at_us
    uint64_t size = 0;  // of the last ask
    bool asking = false;
    // The state was reset while a lease call was in flight: its grant is dropped.
    bool drop_grant = false;
    // Redis' remaining after the last grant, refusal or decision seen, and its reset then.
    int64_t remaining = -1;
    int64_t reset_after_us = 0;
    int64_t told_at_us = 0;
    // The key's rate here: decisions in the current tick, and in the last whole one.
    int64_t tick = 0;
    uint64_t tick_count = 0;
    uint64_t last_tick_count = 0;
    int64_t last_seen_us = 0;
  };
  struct Shard {
    mutable Mutex mu;
    absl::flat_hash_map<std::string, Entry> entries ABSL_GUARDED_BY(mu);
  };

  static bool Leasable(const LimitCheck& check, absl::Span<const LimitCheck> checks, size_t i);
  // A fixed window or a sliding-window counter: a lease's units are its window's, and the lease
  // ends with the window.
  static bool Windowed(const LimitParams& params);
  // Counts one decision of the key of hash `hash`: its count in the current tick so far.
  uint64_t CountHot(size_t hash, int64_t now_us);
  Shard& ShardOf(size_t hash) { return shards_[hash % kShards]; }
  // The lease to ask for `entry` now, if any (marks it asking).
  bool DueAsk(Entry& entry, int64_t now_us, uint64_t* size) const;
  // Drops the units of every entry `match` selects (Forget, ForgetAll).
  void Drop(const std::function<bool(absl::string_view key)>& match);
  // Ends leases past their time in every shard, at most every kTickUs.
  void Sweep(int64_t now_us, std::vector<LeaseReturn>* returns);

  const LeaseOptions options_;
  const uint64_t hot_per_tick_;
  const size_t max_keys_per_shard_;
  std::array<std::atomic<uint64_t>, kSlots> slots_{};
  std::array<Shard, kShards> shards_;
  std::atomic<int64_t> next_sweep_us_{0};
  std::atomic<uint64_t> taken_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> units_granted_{0};
  std::atomic<uint64_t> units_returned_{0};
  std::atomic<uint64_t> units_expired_{0};
  std::atomic<uint64_t> decisions_{0};
};

}  // namespace sluice
