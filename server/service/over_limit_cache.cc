#include "server/service/over_limit_cache.h"

#include <algorithm>

#include "absl/hash/hash.h"

namespace sluice {

OverLimitCache::OverLimitCache(const Clock& clock, size_t capacity)
    : clock_(clock),
      capacity_per_shard_(std::max<size_t>(1, capacity / kShards)),
      shards_(new Shard[kShards]) {}

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
  if (shard.entries.size() >= capacity_per_shard_) {
    absl::erase_if(shard.entries, [now](const auto& kv) { return kv.second.until_us <= now; });
    if (shard.entries.size() >= capacity_per_shard_) {
      shard.entries.erase(shard.entries.begin());
    }
  }
  shard.entries.emplace(std::string(key), entry);
}

void OverLimitCache::Clear() {
  for (size_t s = 0; s < kShards; ++s) {
    MutexLock lock(shards_[s].mu);
    shards_[s].entries.clear();
  }
}

size_t OverLimitCache::size() const {
  size_t n = 0;
  for (size_t s = 0; s < kShards; ++s) {
    MutexLock lock(shards_[s].mu);
    n += shards_[s].entries.size();
  }
  return n;
}

}  // namespace sluice
