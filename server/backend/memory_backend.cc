#include "server/backend/memory_backend.h"

#include <algorithm>

#include "absl/strings/string_view.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "server/common/logging.h"

namespace sluice {

MemoryBackend::MemoryBackend(const Clock& clock, MemoryBackendOptions options)
    : clock_(clock),
      options_(options),
      max_keys_per_shard_(std::max<size_t>(1, options.max_keys / std::max<size_t>(1, options.shards))),
      shards_(new Shard[std::max<size_t>(1, options.shards)]) {}

size_t MemoryBackend::ShardIndex(absl::string_view key) const {
  return absl::HashOf(key) % std::max<size_t>(1, options_.shards);
}

void MemoryBackend::SweepIfDue(Shard& shard, int64_t now_us, bool full) {
  if (!full && now_us < shard.next_sweep_us) {
    return;
  }
  shard.next_sweep_us = now_us + options_.sweep_interval_us;
  absl::erase_if(shard.entries,
                 [now_us](const auto& kv) { return kv.second.expires_at_us <= now_us; });
}

MemoryBackend::Entry& MemoryBackend::EntryFor(Shard& shard, const LimitCheck& check,
                                              int64_t now_us,
                                              absl::Span<const absl::string_view> pinned) {
  auto it = shard.entries.find(check.key);
  if (it == shard.entries.end()) {
    SweepIfDue(shard, now_us, shard.entries.size() >= max_keys_per_shard_);
    if (shard.entries.size() >= max_keys_per_shard_) {
      // Still full of live keys: give up one key's history rather than grow without bound.
      auto victim = shard.entries.begin();
      while (victim != shard.entries.end() &&
             std::find(pinned.begin(), pinned.end(), absl::string_view(victim->first)) !=
                 pinned.end()) {
        ++victim;
      }
      if (victim != shard.entries.end()) {
        shard.entries.erase(victim);
        ++shard.evictions;
      }
      SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
          << "memory backend full (" << options_.max_keys << " keys): evicting live keys";
    }
    it = shard.entries.try_emplace(std::string(check.key)).first;
    it->second.algorithm = check.params.algorithm;
    it->second.state = NewState(check.params.algorithm);
  }
  Entry& entry = it->second;
  if (entry.expires_at_us <= now_us || entry.algorithm != check.params.algorithm) {
    entry.algorithm = check.params.algorithm;
    entry.state = NewState(check.params.algorithm);
    // Live until the caller sets the real expiry, so a sweep meanwhile cannot erase it.
    entry.expires_at_us = now_us + 1;
  }
  return entry;
}

void MemoryBackend::EvaluateGroup(absl::Span<const LimitCheck> checks,
                                  absl::Span<const size_t> group, int64_t now_us,
                                  std::vector<Decision>* decisions) {
  // Lock every shard the group touches, in index order, each once.
  absl::InlinedVector<size_t, 4> shard_ids;
  for (size_t i : group) {
    shard_ids.push_back(ShardIndex(checks[i].key));
  }
  std::sort(shard_ids.begin(), shard_ids.end());
  shard_ids.erase(std::unique(shard_ids.begin(), shard_ids.end()), shard_ids.end());
  for (size_t s : shard_ids) {
    shards_[s].mu.Lock();
  }

  // Decide on copies first; commit only if every check admits.
  absl::InlinedVector<AlgorithmState, 4> trial;
  absl::InlinedVector<Entry*, 4> entries;
  absl::InlinedVector<absl::string_view, 4> held;
  bool all_allowed = true;
  for (size_t i : group) {
    Shard& shard = shards_[ShardIndex(checks[i].key)];
    Entry& entry = EntryFor(shard, checks[i], now_us, held);
    held.push_back(checks[i].key);
    entries.push_back(&entry);
    trial.push_back(entry.state);
    Decision& d = (*decisions)[i];
    d = ::sluice::Evaluate(checks[i].params, trial.back(), now_us, checks[i].hits);
    all_allowed = all_allowed && d.allowed;
  }
  if (all_allowed) {
    for (size_t j = 0; j < group.size(); ++j) {
      entries[j]->state = std::move(trial[j]);
      entries[j]->expires_at_us = now_us + std::max<int64_t>(1, (*decisions)[group[j]].reset_after_us);
    }
  }

  for (auto it = shard_ids.rbegin(); it != shard_ids.rend(); ++it) {
    shards_[*it].mu.Unlock();
  }
}

void MemoryBackend::EvaluateInto(absl::Span<const LimitCheck> checks,
                                 std::vector<Decision>* decisions) {
  decisions->assign(checks.size(), Decision{});
  const int64_t now_us = clock_.NowMicros();
  for (size_t i = 0; i < checks.size(); ++i) {
    // A lone check (the common case) skips the copy-and-commit of EvaluateGroup.
    bool grouped = (i > 0 && checks[i - 1].group == checks[i].group) ||
                   (i + 1 < checks.size() && checks[i + 1].group == checks[i].group);
    if (!grouped) {
      Shard& shard = shards_[ShardIndex(checks[i].key)];
      MutexLock lock(shard.mu);
      Entry& entry = EntryFor(shard, checks[i], now_us);
      Decision& d = (*decisions)[i];
      d = ::sluice::Evaluate(checks[i].params, entry.state, now_us, checks[i].hits);
      entry.expires_at_us = now_us + std::max<int64_t>(1, d.reset_after_us);
      continue;
    }
    // Groups are runs of consecutive checks with one group id.
    size_t end = i;
    absl::InlinedVector<size_t, 4> group;
    while (end < checks.size() && checks[end].group == checks[i].group) {
      group.push_back(end++);
    }
    EvaluateGroup(checks, group, now_us, decisions);
    i = end - 1;
  }
}

void MemoryBackend::Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) {
  std::vector<Decision> decisions;
  EvaluateInto(checks, &decisions);
  std::move(done)(absl::OkStatus(), absl::MakeConstSpan(decisions));
}

size_t MemoryBackend::KeyCount() const {
  size_t n = 0;
  for (size_t s = 0; s < std::max<size_t>(1, options_.shards); ++s) {
    MutexLock lock(shards_[s].mu);
    n += shards_[s].entries.size();
  }
  return n;
}

uint64_t MemoryBackend::EvictionCount() const {
  uint64_t n = 0;
  for (size_t s = 0; s < std::max<size_t>(1, options_.shards); ++s) {
    MutexLock lock(shards_[s].mu);
    n += shards_[s].evictions;
  }
  return n;
}

}  // namespace sluice
