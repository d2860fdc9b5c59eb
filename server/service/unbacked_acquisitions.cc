#include "server/service/unbacked_acquisitions.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/saturating.h"

namespace sluice {
UnbackedAcquisitions::UnbackedAcquisitions(const Clock& clock, size_t max_keys, size_t max_bytes)
    : clock_(clock), map_(max_keys, max_bytes) {}

void UnbackedAcquisitions::Sweep(Map::Shard& shard, int64_t now_us, bool force) {
  if (!force && now_us < shard.next_sweep_us) {
    return;
  }
  shard.next_sweep_us = now_us + kSweepIntervalUs;
  for (auto it = shard.entries.begin(); it != shard.entries.end();) {
    if (it->second.until_us <= now_us) {
      map_.Erase(shard, it++);
    } else {
      ++it;
    }
  }
}

void UnbackedAcquisitions::Record(absl::string_view key, uint64_t hits, bool held_locally,
                                  int64_t lease_us) {
  if (hits == 0) {
    return;
  }
  recorded_.fetch_add(hits, std::memory_order_relaxed);
  Map::Shard& shard = map_.ShardFor(key);
  const int64_t now = clock_.NowMicros();
  const int64_t until = now + lease_us;
  MutexLock lock(shard.mu);
  Sweep(shard, now, /*force=*/false);
  auto it = shard.entries.find(key);
  if (it != shard.entries.end()) {
    Entry& entry = it->second;
    if (entry.until_us <= now) {
      entry = Entry{};  // lapsed: its releases would free nothing held either
    }
    uint64_t& count = held_locally ? entry.local : entry.unheld;
    count = SaturatingAdd(count, hits);
    entry.until_us = std::max(entry.until_us, until);
    return;
  }
  Entry entry;
  (held_locally ? entry.local : entry.unheld) = hits;
  entry.until_us = until;
  map_.Insert(shard, std::string(key), entry, [&](Map::Shard& full) {
    full.mu.AssertHeld();
    Sweep(full, now, /*force=*/true);
  });
}

UnbackedAcquisitions::Taken UnbackedAcquisitions::Take(absl::string_view key, uint64_t hits) {
  Taken taken;
  Map::Shard& shard = map_.ShardFor(key);
  const int64_t now = clock_.NowMicros();
  MutexLock lock(shard.mu);
  Sweep(shard, now, /*force=*/false);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) {
    return taken;
  }
  Entry& entry = it->second;
  if (entry.until_us <= now) {
    map_.Erase(shard, it);
    return taken;
  }
  taken.local = std::min(hits, entry.local);
  entry.local -= taken.local;
  taken.unheld = std::min(hits - taken.local, entry.unheld);
  entry.unheld -= taken.unheld;
  if (entry.local == 0 && entry.unheld == 0) {
    map_.Erase(shard, it);
  }
  released_.fetch_add(taken.total(), std::memory_order_relaxed);
  return taken;
}

void UnbackedAcquisitions::AppendMetrics(std::string* out) const {
  const Usage usage = TotalUsage();
  absl::StrAppend(out,
                  "# HELP sluice_unbacked_acquisitions_keys Keys of in-flight limits with "
                  "acquisitions answered without the backend, whose releases this replica takes "
                  "before the backend (expired ones not yet dropped included)\n"
                  "# TYPE sluice_unbacked_acquisitions_keys gauge\n"
                  "sluice_unbacked_acquisitions_keys ",
                  usage.keys, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_unbacked_acquisitions_bytes Heap held by the unbacked "
                  "acquisitions, as accounted\n"
                  "# TYPE sluice_unbacked_acquisitions_bytes gauge\n"
                  "sluice_unbacked_acquisitions_bytes ",
                  usage.bytes, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_unbacked_acquisitions_max_bytes The bound on "
                  "sluice_unbacked_acquisitions_bytes\n"
                  "# TYPE sluice_unbacked_acquisitions_max_bytes gauge\n"
                  "sluice_unbacked_acquisitions_max_bytes ",
                  map_.max_bytes(), "\n");
  absl::StrAppend(out,
                  "# HELP sluice_unbacked_acquisitions_evictions_total Live entries dropped to "
                  "make room for new ones (their releases reach the backend)\n"
                  "# TYPE sluice_unbacked_acquisitions_evictions_total counter\n"
                  "sluice_unbacked_acquisitions_evictions_total ",
                  usage.evictions, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_unbacked_acquisitions_recorded_total Leases of in-flight limits "
                  "acquired while the backend could not decide (answered by the failure mode)\n"
                  "# TYPE sluice_unbacked_acquisitions_recorded_total counter\n"
                  "sluice_unbacked_acquisitions_recorded_total ",
                  recorded(), "\n");
  absl::StrAppend(out,
                  "# HELP sluice_unbacked_acquisitions_released_total Releases matched to "
                  "acquisitions answered without the backend: nothing given back to the backend\n"
                  "# TYPE sluice_unbacked_acquisitions_released_total counter\n"
                  "sluice_unbacked_acquisitions_released_total ",
                  released(), "\n");
}

}  // namespace sluice
