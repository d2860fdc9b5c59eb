// Remembers keys known to be over their limit, so that a surge of requests that will be denied
// anyway is answered in process instead of costing Redis a script call each.
//
// Why it is correct for every algorithm: a denial with retry_after R for `hits` means the same
// request cannot be admitted before now + R if nothing else arrives; anything else that
// arrives (other clients, other replicas) only consumes, never replenishes, so the denial holds
// at least that long. A request asking for fewer hits might fit sooner, so an entry answers
// only requests of at least the hits that were denied. The cache's error is therefore the clock
// skew between this replica and the clock the decision was made on (Redis TIME by default): an
// entry may deny for up to that long after Redis would have admitted. Entries are dropped when
// the config changes (a new limit may admit what the old one denied).
//
// Bounded: at most `capacity` entries; an entry expires at its retry time. Thread-safe: sharded,
// one mutex per shard.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"

namespace sluice {

class OverLimitCache {
 public:
  // `clock` must outlive the cache. REQUIRES: capacity >= 1.
  OverLimitCache(const Clock& clock, size_t capacity);

  // If `key` is known to deny a request of `hits` right now, returns the remaining wait in
  // microseconds (> 0); otherwise 0.
  int64_t DeniedFor(absl::string_view key, uint64_t hits) const;

  // Records that a request of `hits` on `key` was denied for `retry_after_us` from now.
  void Remember(absl::string_view key, uint64_t hits, int64_t retry_after_us);

  // Forgets everything (on config reload).
  void Clear();

  size_t size() const;
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    int64_t until_us;
    uint64_t min_hits;
  };
  struct Shard {
    mutable Mutex mu;
    absl::flat_hash_map<std::string, Entry> entries ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 32;

  Shard& ShardFor(absl::string_view key) const;

  const Clock& clock_;
  const size_t capacity_per_shard_;
  std::unique_ptr<Shard[]> shards_;
  mutable std::atomic<uint64_t> hits_{0};
};

}  // namespace sluice
