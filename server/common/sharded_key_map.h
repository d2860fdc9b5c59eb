// What the bounded per-key stores have in common (the over-limit cache, the unbacked
// acquisitions of in-flight limits): a map of string keys split over kShards shards, each under
// its own mutex, bounded in keys and in heap bytes as heap_bytes.h counts them (the keys'
// characters, and each Swiss table from its capacity). The store keeps its own policy (what has
// expired, what an entry means); this keeps the shards, the counting and making room.
// Thread-safe as its annotations say: a shard's contents under its own lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "server/common/heap_bytes.h"
#include "server/common/mutex.h"

namespace sluice {

// What a ShardedKeyMap holds and has done.
struct ShardedKeyMapUsage {
  size_t keys = 0;  // expired ones not yet dropped included
  size_t bytes = 0;  // heap bytes held, as counted; at most max_bytes
  uint64_t evictions = 0;  // live entries dropped to make room for new ones
};

template <typename Entry>
class ShardedKeyMap {
 public:
  using EntryMap = absl::flat_hash_map<std::string, Entry>;
  struct Shard {
    mutable Mutex mu;
    EntryMap entries ABSL_GUARDED_BY(mu);
    // Heap bytes of the keys' characters; the table is added from its capacity.
    size_t key_bytes ABSL_GUARDED_BY(mu) = 0;
    uint64_t evictions ABSL_GUARDED_BY(mu) = 0;
    // For a store that drops its expired entries as it goes: when this shard may next.
    int64_t next_sweep_us ABSL_GUARDED_BY(mu) = 0;
  };
  static constexpr size_t kShards = 32;

  // At most `max_keys` keys (each shard its part) and `max_bytes` in all, the shards' own array
  // included.
  ShardedKeyMap(size_t max_keys, size_t max_bytes)
      : keys_per_shard_(std::max<size_t>(1, max_keys / kShards)),
        max_bytes_(max_bytes),
        max_bytes_per_shard_(std::max<size_t>(
            1, (max_bytes - std::min(max_bytes, ArrayHeapBytes<Shard>(kShards))) / kShards)),
        shards_(new Shard[kShards]) {}

  Shard& ShardFor(absl::string_view key) const { return shards_[absl::HashOf(key) % kShards]; }
  Shard& shard(size_t index) const { return shards_[index]; }

  // Drops the entry `it` points at.
  void Erase(Shard& shard, typename EntryMap::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    shard.key_bytes -= StringHeapBytes(it->first);
    shard.entries.erase(it);
    keys_.fetch_sub(1, std::memory_order_relaxed);
  }

  // Adds `key` (not in the shard) with `entry`. When it does not fit, `drop_expired(shard)` runs
  // first (it erases with Erase), then entries are evicted (counted) until it fits. False, and
  // nothing added, when a key this large cannot fit beside the table even alone: erasing never
  // shrinks a table, so it is not worth another key's entry.
  template <typename DropExpired>
  bool Insert(Shard& shard, std::string key, Entry entry, DropExpired drop_expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    const size_t key_bytes = StringHeapBytes(key);
    if (!Fits(shard, key_bytes)) {
      drop_expired(shard);
      if (key_bytes + ShardBytes(shard) - shard.key_bytes > max_bytes_per_shard_) {
        return false;
      }
      while (!Fits(shard, key_bytes) && !shard.entries.empty()) {
        Erase(shard, shard.entries.begin());
        ++shard.evictions;
      }
      if (!Fits(shard, key_bytes)) {
        return false;
      }
    }
    shard.entries.emplace(std::move(key), std::move(entry));
    shard.key_bytes += key_bytes;
    keys_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Drops every entry.
  void Clear() {
    for (size_t s = 0; s < kShards; ++s) {
      MutexLock lock(shards_[s].mu);
      keys_.fetch_sub(shards_[s].entries.size(), std::memory_order_relaxed);
      shards_[s].entries.clear();
      shards_[s].key_bytes = 0;
    }
  }

  // Keys held over all shards (expired ones not yet dropped included), read without a lock.
  size_t keys() const { return keys_.load(std::memory_order_relaxed); }

  // What the shards hold and have done, summed in one pass (each under its lock).
  using Usage = ShardedKeyMapUsage;
  Usage TotalUsage() const {
    Usage usage;
    usage.bytes = ArrayHeapBytes<Shard>(kShards);
    for (size_t s = 0; s < kShards; ++s) {
      MutexLock lock(shards_[s].mu);
      usage.keys += shards_[s].entries.size();
      usage.bytes += ShardBytes(shards_[s]);
      usage.evictions += shards_[s].evictions;
    }
    return usage;
  }
  size_t max_bytes() const { return max_bytes_; }

 private:
  static size_t ShardBytes(const Shard& shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    return shard.key_bytes + SwissTableBytes(shard.entries.capacity(),
                                             sizeof(typename EntryMap::value_type),
                                             alignof(typename EntryMap::value_type));
  }

  // Whether one more key of `key_bytes` fits, counting the table's growth it may cause.
  bool Fits(const Shard& shard, size_t key_bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    const size_t capacity =
        SwissTableCapacityAfterInsert(shard.entries.size(), shard.entries.capacity());
    return shard.entries.size() < keys_per_shard_ &&
           shard.key_bytes + key_bytes +
                   SwissTableBytes(capacity, sizeof(typename EntryMap::value_type),
                                   alignof(typename EntryMap::value_type)) <=
               max_bytes_per_shard_;
  }

  const size_t keys_per_shard_;
  const size_t max_bytes_;
  const size_t max_bytes_per_shard_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<size_t> keys_{0};
};

}  // namespace sluice
