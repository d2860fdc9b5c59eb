// Remembers keys known to be over their limit, so that a surge of requests that will be denied
// anyway is answered in process instead of costing Redis a script call each.
//
// Why it is correct for every algorithm: a denial with retry_after R for `hits` means the same
// request cannot be admitted before now + R if nothing else arrives; anything else that
// arrives (other clients, other replicas) only consumes, never replenishes, so the denial holds
// at least that long. A request asking for fewer hits might fit sooner, so an entry answers
// only requests of at least the hits that were denied, and only under the limit it was denied
// at: one key can be asked under several limits (a request's limit override, envoyproxy/
// ratelimit#1077; with --redis_key_layout=upstream, overrides of different limits share a
// counter), and a denial at 2 a minute says nothing of 100 a minute. The cache's error is therefore the clock
// skew between this replica and the clock the decision was made on (Redis TIME by default): an
// entry may deny for up to that long after Redis would have admitted. Entries are dropped when
// the config changes (a new limit may admit what the old one denied). The one thing that
// replenishes is a refund (is_negative_hits): a refund decided through this replica forgets its
// key's entry (Forget), so the capacity it returns is usable at once here; another replica's
// entry for the key keeps denying until its retry time, as its replica learns of no refund
// (as upstream's local cache). In-flight limits (concurrency), whose capacity comes back by
// releases, are never remembered (OverLimitStep).
//
// Bounded: at most `capacity` entries and `max_bytes` of heap (BytesUsed: the hash tables, which
// hold each key's string object and entry, and the keys' characters); an entry expires at its
// retry time. A new key that does not fit drops expired entries, then live ones (forgetting a
// denial only costs a backend call); a key too large for a shard's share is not remembered.
// Thread-safe: sharded, one mutex per shard.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "server/common/clock.h"
#include "server/common/sharded_key_map.h"

namespace sluice {

class OverLimitCache {
 public:
  // max_bytes when not given (--over_limit_cache_max_mib's default).
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  // `clock` must outlive the cache. Each of the cache's shards gets an equal share of
  // `capacity` and of `max_bytes`. REQUIRES: capacity >= 1, max_bytes >= 1.
  OverLimitCache(const Clock& clock, size_t capacity, size_t max_bytes = kDefaultMaxBytes);

  // If `key` is known to deny a request of `hits` under `limit` (LimitParams::limit) right now,
  // returns the remaining wait in microseconds (> 0); otherwise 0.
  int64_t DeniedFor(absl::string_view key, uint64_t hits, uint64_t limit) const;

  // Records that a request of `hits` on `key` was denied under `limit` for `retry_after_us`
  // from now.
  void Remember(absl::string_view key, uint64_t hits, uint64_t limit, int64_t retry_after_us);

  // Forgets `key`'s entry, if any (a refund gave capacity back).
  void Forget(absl::string_view key);

  // Forgets everything (on config reload).
  void Clear();

  // What the cache holds for `key` right now, without counting a hit (the admin API's
  // inspect): a live entry's remaining wait, the fewest hits it denies and the limit it was
  // learned under; nullopt when it holds none.
  struct Peeked {
    int64_t denied_for_us = 0;
    uint64_t min_hits = 0;
    uint64_t limit = 0;
  };
  std::optional<Peeked> Peek(absl::string_view key) const;

  using Usage = ShardedKeyMapUsage;  // keys, bytes (at most max_bytes), evictions
  Usage TotalUsage() const { return map_.TotalUsage(); }
  size_t size() const { return TotalUsage().keys; }
  size_t BytesUsed() const { return TotalUsage().bytes; }
  uint64_t EvictionCount() const { return TotalUsage().evictions; }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  // sluice_over_limit_cache_keys, _bytes, _max_bytes (gauges) and _evictions_total.
  void AppendMetrics(std::string* out) const;

 private:
  struct Entry {
    int64_t until_us;
    uint64_t min_hits;
    uint64_t limit;
  };
  using Map = ShardedKeyMap<Entry>;

  const Clock& clock_;
  Map map_;
  mutable std::atomic<uint64_t> hits_{0};
};

}  // namespace sluice
