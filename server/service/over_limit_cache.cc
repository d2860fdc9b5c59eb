#include "server/service/over_limit_cache.h"

#include <algorithm>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "server/common/heap_bytes.h"

namespace sluice {

OverLimitCache::OverLimitCache(const Clock& clock, size_t capacity, size_t max_bytes)
    : clock_(clock),
      capacity_per_shard_(std::max<size_t>(1, capacity / kShards)),
      max_bytes_(max_bytes),
      max_bytes_per_shard_(std::max<size_t>(
          1, (max_bytes - std::min(max_bytes, ArrayHeapBytes<Shard>(kShards))) / kShards)),
      shards_(new Shard[kShards]) {}

size_t OverLimitCache::ShardBytes(const Shard& shard) {
  return shard.key_bytes + SwissTableBytes(shard.entries.capacity(), sizeof(EntryMap::value_type),
                                           alignof(EntryMap::value_type));
}

bool OverLimitCache::Fits(const Shard& shard, size_t key_bytes) const {
  const size_t capacity =
      SwissTableCapacityAfterInsert(shard.entries.size(), shard.entries.capacity());
  return shard.entries.size() < capacity_per_shard_ &&
         shard.key_bytes + key_bytes +
                 SwissTableBytes(capacity, sizeof(EntryMap::value_type),
                                 alignof(EntryMap::value_type)) <=
             max_bytes_per_shard_;
}

OverLimitCache::Shard& OverLimitCache::ShardFor(absl::string_view key) const {
  return shards_[absl::HashOf(key) % kShards];
}

int64_t OverLimitCache::DeniedFor(absl::string_view key, uint64_t hits) const {
  Shard& shard = ShardFor(key);
  const int64_t now = clock_.NowMicros();
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end() || it->second.until_us <= now || hits < it->second.min_hits) {
    return 0;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return it->second.until_us - now;
}

void OverLimitCache::Remember(absl::string_view key, uint64_t hits, int64_t retry_after_us) {
  if (retry_after_us <= 0) {
    return;
  }
  Shard& shard = ShardFor(key);
  const int64_t now = clock_.NowMicros();
  const Entry entry{now + retry_after_us, hits};
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it != shard.entries.end()) {
    // Keep whichever claim is stronger: denied longer, or for fewer hits.
    if (it->second.until_us <= now || entry.min_hits <= it->second.min_hits) {
      it->second = entry;
    }
    return;
  }
  std::string owned(key);
  const size_t key_bytes = StringHeapBytes(owned);
  if (!Fits(shard, key_bytes)) {
    for (auto expired = shard.entries.begin(); expired != shard.entries.end();) {
      if (expired->second.until_us <= now) {
        shard.key_bytes -= StringHeapBytes(expired->first);
        shard.entries.erase(expired++);
      } else {
        ++expired;
      }
    }
    // Erasing never shrinks the table: a key that would not fit beside it alone is not worth
    // another key's entry.
    if (key_bytes + ShardBytes(shard) - shard.key_bytes > max_bytes_per_shard_) {
      return;
    }
    while (!Fits(shard, key_bytes) && !shard.entries.empty()) {
      auto victim = shard.entries.begin();
      shard.key_bytes -= StringHeapBytes(victim->first);
      shard.entries.erase(victim);
      ++shard.evictions;
    }
    if (!Fits(shard, key_bytes)) {
      return;
    }
  }
  shard.entries.emplace(std::move(owned), entry);
  shard.key_bytes += key_bytes;
}

void OverLimitCache::Forget(absl::string_view key) {
  Shard& shard = ShardFor(key);
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it != shard.entries.end()) {
    shard.key_bytes -= StringHeapBytes(it->first);
    shard.entries.erase(it);
  }
}

void OverLimitCache::Clear() {
  for (size_t s = 0; s < kShards; ++s) {
    MutexLock lock(shards_[s].mu);
    shards_[s].entries.clear();
    shards_[s].key_bytes = 0;
  }
}

OverLimitCache::Usage OverLimitCache::TotalUsage() const {
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

void OverLimitCache::AppendMetrics(std::string* out) const {
  const Usage usage = TotalUsage();
  absl::StrAppend(out,
                  "# HELP sluice_over_limit_cache_keys Keys remembered as over their limit, "
                  "expired ones not yet dropped included\n"
                  "# TYPE sluice_over_limit_cache_keys gauge\n"
                  "sluice_over_limit_cache_keys ",
                  usage.keys, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_over_limit_cache_bytes Heap held by the over-limit cache, as "
                  "accounted\n"
                  "# TYPE sluice_over_limit_cache_bytes gauge\n"
                  "sluice_over_limit_cache_bytes ",
                  usage.bytes, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_over_limit_cache_max_bytes The bound on "
                  "sluice_over_limit_cache_bytes\n"
                  "# TYPE sluice_over_limit_cache_max_bytes gauge\n"
                  "sluice_over_limit_cache_max_bytes ",
                  max_bytes_, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_over_limit_cache_evictions_total Live entries dropped to make "
                  "room for new ones\n"
                  "# TYPE sluice_over_limit_cache_evictions_total counter\n"
                  "sluice_over_limit_cache_evictions_total ",
                  usage.evictions, "\n");
}

}  // namespace sluice
