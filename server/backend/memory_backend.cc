#include "server/backend/memory_backend.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/algorithm/sliding_window_log.h"
#include "server/common/heap_bytes.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

using LogEntries = decltype(SlidingWindowLogState::entries);

// libstdc++ keeps a deque's elements in blocks of 512 bytes (32 log entries), reached through a
// map of block pointers.
constexpr size_t kLogBlockBytes = 512;
constexpr size_t kLogEntriesPerBlock = kLogBlockBytes / sizeof(LogEntries::value_type);
// A sliding_window_log state may take this fraction of its shard's bytes before it is coarsened,
// so that one busy key cannot push every other key of its shard out.
constexpr size_t kLogShareOfShard = 4;
// A coarsened log is left with about this fraction of what it may hold, so that many
// admissions pass before the next coarsening (each costs a pass over the log).
constexpr size_t kLogCoarseFraction = 4;

// Blocks a log's deque holds: those of its first and last element and all between (an empty
// deque keeps one).
size_t LogBlocks(const LogEntries& entries) {
#if defined(__GLIBCXX__)
  // libstdc++'s deque iterators name their block (_M_node): exact, in constant time.
  return static_cast<size_t>(entries.end()._M_node - entries.begin()._M_node) + 1;
#else
  return entries.size() / kLogEntriesPerBlock + 2;  // at most one partial block at each end
#endif
}

// Slots of the block map of a deque that has had at most `peak_blocks` blocks. libstdc++ starts
// with 8 (a copy, with blocks + 2 if more) and, only when the blocks in use then fill at least
// half of the map, grows it to twice its size plus 2; it never shrinks. So 8 until 4 blocks,
// and at most 4 * peak + 2 after. (Elsewhere: an estimate of the same order.)
size_t LogMapSlots(size_t peak_blocks) { return peak_blocks < 4 ? 8 : 4 * peak_blocks + 2; }

size_t LogHeapBytes(size_t blocks, size_t peak_blocks) {
  return blocks * HeapBlockBytes(kLogBlockBytes) +
         HeapBlockBytes(LogMapSlots(peak_blocks) * sizeof(void*));
}

// Heap bytes of a fresh state of `algorithm` (NewState): an empty log has one block and a map.
size_t FreshStateBytes(Algorithm algorithm) {
  return Engine(algorithm) == Algorithm::kSlidingWindowLog ? LogHeapBytes(1, 1) : 0;
}

// Heap bytes of `state` beyond the state object itself (which lives in the entry's node): only a
// sliding_window_log has any. Raises *peak_blocks to the log's blocks in use.
size_t StateHeapBytes(const AlgorithmState& state, uint32_t* peak_blocks) {
  const auto* log = std::get_if<SlidingWindowLogState>(&state);
  if (log == nullptr) {
    return 0;
  }
  const size_t blocks = LogBlocks(log->entries);
  *peak_blocks = static_cast<uint32_t>(std::min<size_t>(
      std::max<size_t>(*peak_blocks, blocks), std::numeric_limits<uint32_t>::max()));
  return LogHeapBytes(blocks, *peak_blocks);
}

size_t ShardsFor(const MemoryBackendOptions& options) {
  return std::clamp<size_t>(options.max_bytes / MemoryBackend::kMinShardBytes, 1,
                            std::max<size_t>(1, options.shards));
}

// One shard's share of `total` bytes once `fixed` are set aside; at least 1.
size_t ShareOf(size_t total, size_t fixed, size_t shards) {
  return std::max<size_t>(1, (total - std::min(total, fixed)) / shards);
}


// One check's decision on `state`: a refund gives back (nothing to a window that is over), any
// other check takes.
Decision Decide(const LimitCheck& check, AlgorithmState& state, int64_t now_us) {
  Decision decision =
      check.refund
          ? Refund(check.params, state, now_us, RefundsAnEndedWindow(check, now_us) ? 0 : check.hits)
          : Evaluate(check.params, state, now_us, check.hits);
  decision.at_us = now_us;
  return decision;
}

}  // namespace

MemoryBackend::MemoryBackend(const Clock& clock, MemoryBackendOptions options)
    : clock_(clock),
      options_(std::move(options)),
      shard_count_(ShardsFor(options_)),
      max_keys_per_shard_(std::max<size_t>(1, options_.max_keys / shard_count_)),
      max_bytes_per_shard_(
          ShareOf(options_.max_bytes, ArrayHeapBytes<Shard>(shard_count_), shard_count_)),
      max_log_bytes_(max_bytes_per_shard_ / kLogShareOfShard),
      shards_(new Shard[shard_count_]) {}

size_t MemoryBackend::ShardIndex(absl::string_view key) const {
  return absl::HashOf(key) % shard_count_;
}

size_t MemoryBackend::EntryFixedBytes(const std::string& key) {
  return HeapBlockBytes(sizeof(EntryMap::value_type)) + StringHeapBytes(key);
}

size_t MemoryBackend::ShardBytes(const Shard& shard) {
  return shard.entry_bytes + shard.table_bytes;
}

bool MemoryBackend::Fits(const Shard& shard, size_t new_bytes) const {
  const size_t capacity =
      SwissTableCapacityAfterInsert(shard.entries.size(), shard.entries.capacity());
  return shard.entries.size() < max_keys_per_shard_ &&
         shard.entry_bytes + new_bytes + SwissTableBytes(capacity, sizeof(void*), alignof(void*)) <=
             max_bytes_per_shard_;
}

void MemoryBackend::SweepIfDue(Shard& shard, int64_t now_us, bool full) {
  if (!full && now_us < shard.next_sweep_us) {
    return;
  }
  shard.next_sweep_us = now_us + options_.sweep_interval_us;
  for (auto it = shard.entries.begin(); it != shard.entries.end();) {
    if (it->second.expires_at_us <= now_us) {
      shard.entry_bytes -= EntryFixedBytes(it->first) + it->second.state_bytes;
      shard.entries.erase(it++);
    } else {
      ++it;
    }
  }
}

bool MemoryBackend::EvictOne(Shard& shard, absl::Span<const absl::string_view> keep) {
  for (auto it = shard.entries.begin(); it != shard.entries.end(); ++it) {
    if (std::find(keep.begin(), keep.end(), absl::string_view(it->first)) != keep.end()) {
      continue;
    }
    shard.entry_bytes -= EntryFixedBytes(it->first) + it->second.state_bytes;
    shard.entries.erase(it);
    ++shard.evictions;
    return true;
  }
  return false;
}

bool MemoryBackend::MakeRoom(Shard& shard, size_t new_bytes, int64_t now_us,
                             absl::Span<const absl::string_view> pinned) {
  const bool fits = Fits(shard, new_bytes);
  SweepIfDue(shard, now_us, !fits);
  if (fits) {
    return true;
  }
  // Erasing keys never shrinks the table: an entry that would not fit beside it alone is not
  // worth anyone else's history.
  if (new_bytes + shard.table_bytes > max_bytes_per_shard_) {
    return false;
  }
  bool evicted = false;
  // Still full of live keys: give up other keys' history rather than grow without bound.
  while (!Fits(shard, new_bytes) && EvictOne(shard, pinned)) {
    evicted = true;
  }
  if (evicted) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
        << options_.metric_prefix << ": full (" << options_.max_keys << " keys, "
        << (options_.max_bytes >> 20) << " MiB): evicting live keys";
  }
  return Fits(shard, new_bytes);
}

void MemoryBackend::Remeasure(Shard& shard, Entry& entry) {
  const size_t bytes = StateHeapBytes(entry.state, &entry.log_peak_blocks);
  shard.entry_bytes = shard.entry_bytes - entry.state_bytes + bytes;
  entry.state_bytes = bytes;
}

MemoryBackend::Entry* MemoryBackend::EntryFor(Shard& shard, const LimitCheck& check,
                                              int64_t now_us,
                                              absl::Span<const absl::string_view> pinned) {
  auto it = shard.entries.find(check.key);
  if (it == shard.entries.end()) {
    std::string key(check.key);
    const size_t new_bytes = EntryFixedBytes(key) + FreshStateBytes(check.params.algorithm);
    if (!MakeRoom(shard, new_bytes, now_us, pinned)) {
      ++shard.evictions;
      SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
          << options_.metric_prefix << ": no room for a key of " << key.size()
          << " bytes in a shard of " << max_bytes_per_shard_
          << " bytes (too large alone, or beside its own request's keys): decided as a new key "
             "and not kept";
      return nullptr;
    }
    // The entry starts as a default (fixed window, no heap); the reset below gives it its state.
    it = shard.entries.try_emplace(std::move(key)).first;
    shard.entry_bytes += EntryFixedBytes(it->first);
    // A node map's slot is a pointer to the node.
    shard.table_bytes = SwissTableBytes(shard.entries.capacity(), sizeof(void*), alignof(void*));
  }
  Entry& entry = it->second;
  if (entry.expires_at_us <= now_us || entry.algorithm != check.params.algorithm) {
    entry.algorithm = check.params.algorithm;
    entry.state = NewState(check.params.algorithm);
    entry.log_peak_blocks = 0;
    Remeasure(shard, entry);
    // Live until the caller sets the real expiry, so a sweep meanwhile cannot erase it.
    entry.expires_at_us = now_us + 1;
  }
  return &entry;
}

void MemoryBackend::Settle(Shard& shard, Entry& entry, const LimitParams& params,
                           int64_t now_us) {
  auto* log = std::get_if<SlidingWindowLogState>(&entry.state);
  if (log == nullptr) {
    return;
  }
  Remeasure(shard, entry);
  if (entry.state_bytes <= max_log_bytes_) {
    return;
  }
  // A grid on which one period holds about `target` entries.
  const size_t per_entry = HeapBlockBytes(kLogBlockBytes) / kLogEntriesPerBlock;
  const int64_t target = static_cast<int64_t>(
      std::max<size_t>(1, max_log_bytes_ / kLogCoarseFraction / per_entry));
  if (static_cast<int64_t>(log->entries.size()) <= target + 2) {
    return;  // as coarse as the grid would make it: the shard's bound takes over
  }
  const int64_t grid = std::max<int64_t>(1, (params.period_us + target - 1) / target);
  const size_t before = log->entries.size();
  CoarsenSlidingWindowLog(*log, now_us, params.period_us, grid);
  if (!log->entries.empty()) {
    // The newest entry may have moved later; the key must live until it expires.
    entry.expires_at_us =
        std::max(entry.expires_at_us, log->entries.back().first + params.period_us);
  }
  // The log was rebuilt: its block map is new.
  entry.log_peak_blocks = 0;
  Remeasure(shard, entry);
  ++shard.coarsenings;
  SLUICE_LOG_EVERY_SECONDS(INFO, 60)
      << options_.metric_prefix << ": a sliding_window_log key outgrew " << max_log_bytes_
      << " bytes; its " << before << " entries were merged into " << log->entries.size()
      << " on a " << grid << " us grid (its hits may now be admitted up to that much later)";
}

void MemoryBackend::EnforceBound(Shard& shard, int64_t now_us,
                                 absl::Span<const absl::string_view> keep) {
  if (ShardBytes(shard) <= max_bytes_per_shard_) {
    return;
  }
  SweepIfDue(shard, now_us, /*full=*/true);
  bool evicted = false;
  // Other keys first; the kept ones only if they alone are too much.
  while (ShardBytes(shard) > max_bytes_per_shard_ && EvictOne(shard, keep)) {
    evicted = true;
  }
  while (ShardBytes(shard) > max_bytes_per_shard_ && EvictOne(shard, {})) {
    evicted = true;
  }
  if (evicted) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
        << options_.metric_prefix << ": full (" << (options_.max_bytes >> 20)
        << " MiB): evicting live keys";
  }
}

void MemoryBackend::EvaluateGroup(absl::Span<const LimitCheck> checks,
                                  absl::Span<const size_t> group, int64_t now_us,
                                  absl::Span<Decision> decisions) {
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

  // Decide on copies first; commit only if every check admits, except for the checks that are
  // charged whatever happens (Charge::kAlways), whose trial state is committed either way.
  absl::InlinedVector<AlgorithmState, 4> trial;
  absl::InlinedVector<Entry*, 4> entries;
  // The shard of each entry, or null for a key too large to keep (decided on `unkept`).
  absl::InlinedVector<Shard*, 4> entry_shards;
  absl::InlinedVector<std::unique_ptr<Entry>, 1> unkept;
  absl::InlinedVector<absl::string_view, 4> held;
  bool all_allowed = true;
  for (size_t i : group) {
    Shard* shard = &shards_[ShardIndex(checks[i].key)];
    Entry* entry = EntryFor(*shard, checks[i], now_us, held);
    if (entry == nullptr) {
      unkept.push_back(std::make_unique<Entry>());
      entry = unkept.back().get();
      entry->state = NewState(checks[i].params.algorithm);
      shard = nullptr;
    }
    held.push_back(checks[i].key);
    entries.push_back(entry);
    entry_shards.push_back(shard);
    trial.push_back(entry->state);
    Decision& d = decisions[i];
    d = Decide(checks[i], trial.back(), now_us);
    all_allowed = all_allowed && d.allowed;
  }
  for (size_t j = 0; j < group.size(); ++j) {
    const LimitCheck& check = checks[group[j]];
    if (all_allowed || check.refund || ChargesWhenDenied(check.params, check.hits)) {
      entries[j]->state = std::move(trial[j]);
      entries[j]->expires_at_us = now_us + std::max<int64_t>(1, decisions[group[j]].reset_after_us);
      if (entry_shards[j] != nullptr) {
        Settle(*entry_shards[j], *entries[j], check.params, now_us);
      }
    }
  }
  // The decisions are made: from here on, the group's keys are evicted like any other (last).
  for (size_t s : shard_ids) {
    EnforceBound(shards_[s], now_us, held);
  }

  for (auto it = shard_ids.rbegin(); it != shard_ids.rend(); ++it) {
    shards_[*it].mu.Unlock();
  }
}

void MemoryBackend::EvaluateInto(absl::Span<const LimitCheck> checks,
                                 absl::Span<Decision> decisions) {
  std::fill(decisions.begin(), decisions.end(), Decision{});
  const int64_t now_us = clock_.NowMicros();
  for (size_t i = 0; i < checks.size(); ++i) {
    // A lone check (the common case) skips the copy-and-commit of EvaluateGroup.
    bool grouped = (i > 0 && checks[i - 1].group == checks[i].group) ||
                   (i + 1 < checks.size() && checks[i + 1].group == checks[i].group);
    if (!grouped) {
      const LimitCheck& check = checks[i];
      Shard& shard = shards_[ShardIndex(check.key)];
      MutexLock lock(shard.mu);
      Entry* entry = EntryFor(shard, check, now_us);
      Decision& d = decisions[i];
      if (entry == nullptr) {
        AlgorithmState fresh = NewState(check.params.algorithm);
        d = Decide(check, fresh, now_us);
        continue;
      }
      d = Decide(check, entry->state, now_us);
      entry->expires_at_us = now_us + std::max<int64_t>(1, d.reset_after_us);
      Settle(shard, *entry, check.params, now_us);
      EnforceBound(shard, now_us, {&check.key, 1});
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

void MemoryBackend::Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& /*trace*/,
                             EvaluateCallback done) {
  absl::InlinedVector<Decision, 4> decisions(checks.size());
  EvaluateInto(checks, absl::MakeSpan(decisions));
  std::move(done)(absl::OkStatus(), absl::MakeConstSpan(decisions));
}

// ---- The admin API.

void MemoryBackend::Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) {
  std::vector<StateReport> reports(checks.size());
  const int64_t now_us = clock_.NowMicros();
  for (size_t i = 0; i < checks.size(); ++i) {
    const LimitCheck& check = checks[i];
    StateReport& report = reports[i];
    report.now_us = now_us;
    report.state = NewState(check.params.algorithm);
    StoredKey& key = report.keys.emplace_back();
    key.key = std::string(check.key);
    key.role = "state";
    {
      Shard& shard = shards_[ShardIndex(check.key)];
      MutexLock lock(shard.mu);
      auto it = shard.entries.find(check.key);
      if (it != shard.entries.end() && it->second.expires_at_us > now_us) {
        key.exists = true;
        key.ttl_ms = (it->second.expires_at_us - now_us + 999) / 1000;
        // EntryFor starts over on another algorithm's state.
        key.readable = it->second.algorithm == check.params.algorithm;
        if (key.readable) {
          report.state = it->second.state;
        }
      }
    }
    AlgorithmState copy = report.state;
    report.answer = sluice::Evaluate(check.params, copy, now_us, 0);
    report.answer.at_us = now_us;
  }
  std::move(done)(absl::OkStatus(), std::move(reports));
}

void MemoryBackend::Reset(absl::Span<const LimitCheck> checks, ResetCallback done) {
  std::vector<std::string> deleted;
  const int64_t now_us = clock_.NowMicros();
  for (const LimitCheck& check : checks) {
    Shard& shard = shards_[ShardIndex(check.key)];
    MutexLock lock(shard.mu);
    auto it = shard.entries.find(check.key);
    if (it == shard.entries.end()) {
      continue;
    }
    if (it->second.expires_at_us > now_us) {
      deleted.emplace_back(it->first);
    }
    shard.entry_bytes -= EntryFixedBytes(it->first) + it->second.state_bytes;
    shard.entries.erase(it);
  }
  std::move(done)(absl::OkStatus(), std::move(deleted));
}

MemoryBackend::Usage MemoryBackend::TotalUsage() const {
  Usage usage;
  usage.bytes = ArrayHeapBytes<Shard>(shard_count_);
  for (size_t s = 0; s < shard_count_; ++s) {
    MutexLock lock(shards_[s].mu);
    usage.keys += shards_[s].entries.size();
    usage.bytes += ShardBytes(shards_[s]);
    usage.evictions += shards_[s].evictions;
    usage.coarsenings += shards_[s].coarsenings;
  }
  return usage;
}

void MemoryBackend::AppendMetrics(std::string* out) const {
  const std::string& p = options_.metric_prefix;
  const Usage usage = TotalUsage();
  absl::StrAppend(out, "# HELP ", p, "_keys Keys held, expired ones not yet swept included\n",
                  "# TYPE ", p, "_keys gauge\n", p, "_keys ", usage.keys, "\n");
  absl::StrAppend(out, "# HELP ", p,
                  "_bytes Heap held by the keys, their state and the hash tables, as "
                  "accounted\n",
                  "# TYPE ", p, "_bytes gauge\n", p, "_bytes ", usage.bytes, "\n");
  absl::StrAppend(out, "# HELP ", p, "_max_bytes The bound on ", p, "_bytes\n", "# TYPE ", p,
                  "_max_bytes gauge\n", p, "_max_bytes ", options_.max_bytes, "\n");
  absl::StrAppend(out, "# HELP ", p,
                  "_evictions_total Live keys evicted to stay within the bounds, and keys too "
                  "large to keep\n",
                  "# TYPE ", p, "_evictions_total counter\n", p, "_evictions_total ",
                  usage.evictions, "\n");
  absl::StrAppend(out, "# HELP ", p,
                  "_log_coarsenings_total sliding_window_log states coarsened to stay within "
                  "their share\n",
                  "# TYPE ", p, "_log_coarsenings_total counter\n", p,
                  "_log_coarsenings_total ", usage.coarsenings, "\n");
}

}  // namespace sluice
