// The embedded backend: every algorithm runs in process on state kept in a sharded hash map.
// It is the default backend of a single replica and the local fallback when Redis cannot answer.
//
// Thread-safe: keys are spread over shards by hash, each shard has its own mutex, and a group
// of checks locks its shards in index order. Memory is bounded: a key expires once its state is
// back to that of a fresh key (Decision::reset_after_us), expired keys are swept as shards are
// used, and a shard at its key limit evicts to admit a new key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"

namespace sluice {

struct MemoryBackendOptions {
  // Number of independently locked shards. REQUIRES: >= 1.
  size_t shards = 64;
  // Keys kept at most, over all shards; past this a new key evicts an old one.
  size_t max_keys = 1000000;
  // How often a shard scans itself for expired keys, at the most.
  int64_t sweep_interval_us = 1000000;
};

class MemoryBackend final : public Backend {
 public:
  // `clock` must outlive the backend.
  MemoryBackend(const Clock& clock, MemoryBackendOptions options = {});

  // Decides all checks and calls `done` inline, before returning. Never fails.
  void Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) override;
  absl::string_view Name() const override { return "memory"; }

  // The synchronous core of Evaluate: fills `decisions` (resized to checks.size()).
  void EvaluateInto(absl::Span<const LimitCheck> checks, std::vector<Decision>* decisions);

  // Keys currently held, expired or not (for tests and metrics).
  size_t KeyCount() const;
  // Keys evicted because a shard was full.
  uint64_t EvictionCount() const;

 private:
  struct Entry {
    AlgorithmState state;
    Algorithm algorithm;
    int64_t expires_at_us = 0;
  };
  struct Shard {
    mutable Mutex mu;
    // Node-based so that an Entry& stays valid while a group inserts its other keys.
    absl::node_hash_map<std::string, Entry> entries ABSL_GUARDED_BY(mu);
    int64_t next_sweep_us ABSL_GUARDED_BY(mu) = 0;
    uint64_t evictions ABSL_GUARDED_BY(mu) = 0;
  };

  size_t ShardIndex(absl::string_view key) const;
  // Finds or creates the live entry for `check`; resets it when expired or when the rule's
  // algorithm changed since the state was written. A full shard evicts some other key, never
  // one of `pinned` (the keys the caller's group already holds).
  Entry& EntryFor(Shard& shard, const LimitCheck& check, int64_t now_us,
                  absl::Span<const absl::string_view> pinned = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  void SweepIfDue(Shard& shard, int64_t now_us, bool full) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Decides one group of checks (indices into `checks`) all-or-nothing. It holds a set of shard
  // mutexes known only at run time, which the thread-safety analysis cannot follow.
  void EvaluateGroup(absl::Span<const LimitCheck> checks, absl::Span<const size_t> group,
                     int64_t now_us, std::vector<Decision>* decisions)
      ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const Clock& clock_;
  const MemoryBackendOptions options_;
  const size_t max_keys_per_shard_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace sluice
