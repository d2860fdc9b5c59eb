#include "server/service/over_limit_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {

OverLimitCache::OverLimitCache(const Clock& clock, size_t capacity, size_t max_bytes)
    : clock_(clock), map_(capacity, max_bytes) {}

int64_t OverLimitCache::DeniedFor(absl::string_view key, uint64_t hits, uint64_t limit) const {
  Map::Shard& shard = map_.ShardFor(key);
  const int64_t now = clock_.NowMicros();
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end() || it->second.until_us <= now || hits < it->second.min_hits ||
      limit != it->second.limit) {
    return 0;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return it->second.until_us - now;
}

void OverLimitCache::Remember(absl::string_view key, uint64_t hits, uint64_t limit,
                              int64_t retry_after_us) {
  if (retry_after_us <= 0) {
    return;
  }
  Map::Shard& shard = map_.ShardFor(key);
  const int64_t now = clock_.NowMicros();
  const Entry entry{now + retry_after_us, hits, limit};
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it != shard.entries.end()) {
    // Keep whichever claim is stronger: denied longer, or for fewer hits. A claim made under
    // another limit says nothing of this one: the newest replaces it.
    if (it->second.until_us <= now || entry.limit != it->second.limit ||
        entry.min_hits <= it->second.min_hits) {
      it->second = entry;
    }
    return;
  }
  map_.Insert(shard, std::string(key), entry, [&](Map::Shard& full) {
    full.mu.AssertHeld();
    for (auto expired = full.entries.begin(); expired != full.entries.end();) {
      if (expired->second.until_us <= now) {
        map_.Erase(full, expired++);
      } else {
        ++expired;
      }
    }
  });
}

void OverLimitCache::Forget(absl::string_view key) {
  Map::Shard& shard = map_.ShardFor(key);
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it != shard.entries.end()) {
    map_.Erase(shard, it);
  }
}

void OverLimitCache::Clear() { map_.Clear(); }

std::optional<OverLimitCache::Peeked> OverLimitCache::Peek(absl::string_view key) const {
  Map::Shard& shard = map_.ShardFor(key);
  const int64_t now = clock_.NowMicros();
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end() || it->second.until_us <= now) {
    return std::nullopt;
  }
  return Peeked{it->second.until_us - now, it->second.min_hits, it->second.limit};
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
                  map_.max_bytes(), "\n");
  absl::StrAppend(out,
                  "# HELP sluice_over_limit_cache_evictions_total Live entries dropped to make "
                  "room for new ones\n"
                  "# TYPE sluice_over_limit_cache_evictions_total counter\n"
                  "sluice_over_limit_cache_evictions_total ",
                  usage.evictions, "\n");
}

}  // namespace sluice
