// The embedded backend: every algorithm runs in process on state kept in a sharded hash map.
// It is the default backend of a single replica and the local fallback when Redis cannot answer.
//
// Thread-safe: keys are spread over shards by hash, each shard has its own mutex, and a group
// of checks locks its shards in index order.
//
// Memory is bounded in keys and in bytes. A key expires once its state is back to that of a
// fresh key (Decision::reset_after_us), and expired keys are swept as shards are used. Each
// shard accounts the heap it holds (BytesUsed: every key's string, its hash-map node and its
// state, a sliding_window_log's entries included, plus the hash table itself) and keeps it
// within its share of max_bytes (less the shards' own array), as it keeps its key count within
// its share of max_keys: a new key that does not fit sweeps the shard and then evicts live keys,
// never one that the caller's group holds; a state that grows past the share evicts other keys
// after the decision.
// Evicting a live key forgets its history, so that key may admit up to a whole limit again.
// A sliding_window_log whose state alone grows past a quarter of its shard's bytes is coarsened
// instead (CoarsenSlidingWindowLog: never admits more, may admit later). A key too large to be
// kept even in an empty shard is decided as a fresh key each time and not kept.
// The bound holds between calls; during one decision a log may hold one more block of entries,
// and a group decides on copies of its states.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"

namespace sluice {

struct MemoryBackendOptions {
  // Number of independently locked shards; fewer when max_bytes is small (see max_bytes).
  // REQUIRES: >= 1.
  size_t shards = 64;
  // Keys kept at most, over all shards; past this a new key evicts an old one.
  size_t max_keys = 1000000;
  // How often a shard scans itself for expired keys, at the most.
  int64_t sweep_interval_us = 1000000;
  // Heap bytes kept at most, over all shards (see BytesUsed); past this a new key, or a state
  // that grew, evicts old keys. Each shard gets an equal share of at least kMinShardBytes (so
  // a share can hold a large key): with less than shards x kMinShardBytes, there are fewer
  // shards. REQUIRES: >= 1.
  size_t max_bytes = size_t{1} << 30;
  // Names the metrics of AppendMetrics: <prefix>_keys, <prefix>_bytes, ...
  std::string metric_prefix = "sluice_memory_backend";
};

class MemoryBackend final : public Backend {
 public:
  // The smallest share of max_bytes a shard gets (unless max_bytes itself is smaller).
  static constexpr size_t kMinShardBytes = size_t{1} << 20;

  // `clock` must outlive the backend.
  MemoryBackend(const Clock& clock, MemoryBackendOptions options = {});

  // Decides all checks and calls `done` inline, before returning. Never fails.
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                EvaluateCallback done) override;
  absl::string_view Name() const override { return "memory"; }
  // <prefix>_keys, _bytes, _max_bytes (gauges), _evictions_total, _log_coarsenings_total.
  void AppendMetrics(std::string* out) const override;
  // The admin API: each check's entry read (a copy of its state, its expiry as the TTL) or
  // erased under its shard's lock, the storage key being the one key ("state"); `done` runs
  // inline, before returning. Never fails.
  void Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) override;
  void Reset(absl::Span<const LimitCheck> checks, ResetCallback done) override;

  // The synchronous core of Evaluate: fills `decisions`, one per check.
  // REQUIRES: decisions.size() == checks.size().
  void EvaluateInto(absl::Span<const LimitCheck> checks, absl::Span<Decision> decisions);

  // What the shards hold and have done, summed over them in one pass (each under its lock).
  struct Usage {
    // Keys currently held, expired or not.
    size_t keys = 0;
    // Heap bytes, as accounted (see the file comment); at most max_bytes between calls.
    // Estimated from the allocator's and the containers' layouts (server/common/heap_bytes.h);
    // the tests hold it to what glibc reports.
    size_t bytes = 0;
    // Keys evicted to stay within max_keys or max_bytes, and keys too large to be kept at all.
    uint64_t evictions = 0;
    // Times a sliding_window_log state was coarsened to stay within its share.
    uint64_t coarsenings = 0;
  };
  Usage TotalUsage() const;
  // Parts of TotalUsage, for tests.
  size_t KeyCount() const { return TotalUsage().keys; }
  uint64_t EvictionCount() const { return TotalUsage().evictions; }
  size_t BytesUsed() const { return TotalUsage().bytes; }
  uint64_t CoarseningCount() const { return TotalUsage().coarsenings; }
  // Shards in use (options.shards, or fewer for a small max_bytes).
  size_t ShardCount() const { return shard_count_; }

 private:
  struct Entry {
    AlgorithmState state;
    int64_t expires_at_us = 0;
    // Heap bytes of `state` as last measured and counted in the shard's entry_bytes.
    size_t state_bytes = 0;
    // sliding_window_log: the most blocks of entries the log has had since it was built,
    // which bounds the size of its block map (see StateHeapBytes in the .cc).
    uint32_t log_peak_blocks = 0;
    Algorithm algorithm = Algorithm::kFixedWindow;
  };
  using EntryMap = absl::node_hash_map<std::string, Entry>;
  struct Shard {
    mutable Mutex mu;
    // Node-based so that an Entry& stays valid while a group inserts its other keys.
    EntryMap entries ABSL_GUARDED_BY(mu);
    // Sum over entries of their node, key and state bytes.
    size_t entry_bytes ABSL_GUARDED_BY(mu) = 0;
    // The hash table's array, from its capacity (which only an insertion changes).
    size_t table_bytes ABSL_GUARDED_BY(mu) = 0;
    int64_t next_sweep_us ABSL_GUARDED_BY(mu) = 0;
    uint64_t evictions ABSL_GUARDED_BY(mu) = 0;
    uint64_t coarsenings ABSL_GUARDED_BY(mu) = 0;
  };

  size_t ShardIndex(absl::string_view key) const;
  // Heap bytes of an entry apart from its state's own: its node (key object and Entry) and the
  // key's characters.
  static size_t EntryFixedBytes(const std::string& key);
  static size_t ShardBytes(const Shard& shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Whether the shard stays within its bounds with one more entry of `new_bytes`, counting the
  // growth of the hash table that inserting it may cause.
  bool Fits(const Shard& shard, size_t new_bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Finds or creates the live entry for `check`; resets it when expired or when the rule's
  // algorithm changed since the state was written. Makes room for a new key (MakeRoom), never
  // evicting one of `pinned` (the keys the caller's group already holds). Returns null when the
  // key cannot be kept: the caller decides it on a fresh state of its own.
  Entry* EntryFor(Shard& shard, const LimitCheck& check, int64_t now_us,
                  absl::Span<const absl::string_view> pinned = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Whether a new entry of `new_bytes` (node, key and fresh state) fits, after sweeping and
  // evicting keys other than `pinned` as needed; evicts nothing when it could never fit.
  bool MakeRoom(Shard& shard, size_t new_bytes, int64_t now_us,
                absl::Span<const absl::string_view> pinned) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Evicts one key not in `keep`; false when there is none.
  bool EvictOne(Shard& shard, absl::Span<const absl::string_view> keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  void SweepIfDue(Shard& shard, int64_t now_us, bool full) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Counts the entry's state as it is now in the shard's bytes.
  static void Remeasure(Shard& shard, Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // After a decision changed `entry`: re-counts a sliding_window_log (no other state has heap
  // of its own), and coarsens it when it has outgrown its share.
  void Settle(Shard& shard, Entry& entry, const LimitParams& params, int64_t now_us)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Brings the shard back within its bytes by evicting keys, those in `keep` last.
  void EnforceBound(Shard& shard, int64_t now_us, absl::Span<const absl::string_view> keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Decides one group of checks (indices into `checks`) all-or-nothing. It holds a set of shard
  // mutexes known only at run time, which the thread-safety analysis cannot follow.
  void EvaluateGroup(absl::Span<const LimitCheck> checks, absl::Span<const size_t> group,
                     int64_t now_us, absl::Span<Decision> decisions) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const Clock& clock_;
  const MemoryBackendOptions options_;
  const size_t shard_count_;
  const size_t max_keys_per_shard_;
  const size_t max_bytes_per_shard_;
  // A sliding_window_log state larger than this is coarsened.
  const size_t max_log_bytes_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace sluice
