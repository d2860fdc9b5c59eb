#include "server/backend/lease_table.h"

#include <algorithm>
#include <cmath>

#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/algorithm/fixed_window.h"

namespace sluice {
namespace {

// A hotness slot: the key's tag (20 bits of its hash), the tick it counts (12 bits of it) and
// the count in that tick (32 bits).
constexpr uint64_t kTagBits = 20;
constexpr uint64_t kTickMask = 0xFFF;
constexpr uint64_t kCountMask = 0xFFFFFFFF;

uint64_t TagOf(size_t hash) { return (static_cast<uint64_t>(hash) >> (64 - kTagBits)); }

bool SameRule(const LimitParams& a, const LimitParams& b) {
  return a.algorithm == b.algorithm && a.limit == b.limit && a.period_us == b.period_us &&
         a.burst == b.burst && a.charge == b.charge && a.shares_descriptor == b.shares_descriptor &&
         a.hash_tagged == b.hash_tagged && a.calendar_months == b.calendar_months;
}

}  // namespace

bool LeaseTable::Windowed(const LimitParams& params) {
  return params.algorithm == Algorithm::kFixedWindow ||
         params.algorithm == Algorithm::kSlidingWindowCounter;
}

bool LeaseTable::WindowEnded(const LeaseReturn& give_back, int64_t now_us) {
  return Windowed(give_back.params) &&
         FixedWindowAt(give_back.params, give_back.at_us).start_us !=
             FixedWindowAt(give_back.params, now_us).start_us;
}

LeaseTable::LeaseTable(LeaseOptions options)
    : options_(options),
      hot_per_tick_(static_cast<uint64_t>(
          std::max(1.0, std::ceil(options.hot_rate * static_cast<double>(kTickUs) / 1e6)))),
      max_keys_per_shard_(std::max<size_t>(1, options.max_keys / kShards)) {}

bool LeaseTable::Leasable(const LimitCheck& check, absl::Span<const LimitCheck> checks,
                          size_t i) {
  if (check.refund) return false;
  switch (check.params.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
    case Algorithm::kFixedWindow:
      break;
    case Algorithm::kSlidingWindowCounter:
      // Its windows are whole periods from the epoch (WindowEnded).
      if (check.params.calendar_months) return false;
      break;
    default:
      return false;
  }
  // Alone in its group: a group is decided all-or-nothing in one script call.
  return (i == 0 || checks[i - 1].group != check.group) &&
         (i + 1 == checks.size() || checks[i + 1].group != check.group);
}

uint64_t LeaseTable::CountHot(size_t hash, int64_t now_us) {
  std::atomic<uint64_t>& slot = slots_[(hash >> 8) % kSlots];
  const uint64_t tag = TagOf(hash);
  const uint64_t tick = static_cast<uint64_t>(now_us / kTickUs) & kTickMask;
  uint64_t seen = slot.load(std::memory_order_relaxed);
  for (;;) {
    const bool mine = (seen >> (64 - kTagBits)) == tag && ((seen >> 32) & kTickMask) == tick;
    const uint64_t next = mine ? ((seen & kCountMask) == kCountMask ? seen : seen + 1)
                               : (tag << (64 - kTagBits)) | (tick << 32) | 1;
    if (slot.compare_exchange_weak(seen, next, std::memory_order_relaxed)) {
      return next & kCountMask;
    }
  }
}

bool LeaseTable::DueAsk(Entry& entry, int64_t now_us, uint64_t* size) const {
  if (entry.asking || entry.remaining < 0) return false;
  if (entry.units > 0 && entry.units * 2 >= entry.size && now_us < entry.ends_us) return false;
  // The rate here: the last whole tick's, or the current one's if it is already higher.
  const double per_second = static_cast<double>(std::max(entry.last_tick_count, entry.tick_count)) *
                            (1e6 / static_cast<double>(kTickUs));
  double wanted = std::ceil(per_second * absl::ToDoubleSeconds(options_.window));
  if (Windowed(entry.params)) {
    // No more than this replica can use before the window ends: what is left then is lost to
    // the window (WindowEnded).
    const int64_t left_us = FixedWindowAt(entry.params, now_us).end_us - now_us;
    wanted = std::min(wanted, std::ceil(per_second * static_cast<double>(left_us) / 1e6));
  }
  const double cap = std::floor(static_cast<double>(entry.remaining) * options_.max_share /
                                static_cast<double>(std::max(1, options_.replicas)));
  const double units = std::min(wanted, cap);
  if (units < 2) return false;
  *size = static_cast<uint64_t>(units);
  return true;
}

void LeaseTable::Sweep(int64_t now_us, std::vector<LeaseReturn>* returns) {
  int64_t due = next_sweep_us_.load(std::memory_order_relaxed);
  if (now_us < due ||
      !next_sweep_us_.compare_exchange_strong(due, now_us + kTickUs, std::memory_order_relaxed)) {
    return;
  }
  for (Shard& shard : shards_) {
    MutexLock lock(shard.mu);
    for (auto it = shard.entries.begin(); it != shard.entries.end();) {
      Entry& entry = it->second;
      if (entry.units > 0 && now_us >= entry.ends_us) {
        returns->push_back(LeaseReturn{it->first, entry.params, entry.units, entry.granted_at_us});
        entry.units = 0;
      }
      if (entry.units == 0 && !entry.asking && now_us - entry.last_seen_us > kForgetUs) {
        shard.entries.erase(it++);
      } else {
        ++it;
      }
    }
  }
}

bool LeaseTable::Admit(absl::Span<const LimitCheck> checks, int64_t now_us,
                       absl::Span<Decision> decisions, std::vector<LeaseAsk>* asks,
                       std::vector<LeaseReturn>* returns, Tracked* tracked) {
  if (!enabled()) return false;
  Sweep(now_us, returns);
  const int64_t tick = now_us / kTickUs;
  bool all = true;
  size_t taken = 0;  // checks whose units are taken, from the first
  for (size_t i = 0; i < checks.size(); ++i) {
    const LimitCheck& check = checks[i];
    if (!Leasable(check, checks, i)) {
      // Never leased, so not counted either.
      all = false;
      continue;
    }
    const size_t hash = absl::HashOf(check.key);
    const uint64_t count = CountHot(hash, now_us);
    Shard& shard = ShardOf(hash);
    MutexLock lock(shard.mu);
    auto it = shard.entries.find(check.key);
    if (it == shard.entries.end()) {
      all = false;
      if (count < hot_per_tick_ || shard.entries.size() >= max_keys_per_shard_) continue;
      it = shard.entries.emplace(std::string(check.key), Entry{}).first;
      it->second.params = check.params;
      // Its rate so far in this tick, this decision counted below.
      it->second.tick = tick;
      it->second.tick_count = count - 1;
    }
    Entry& entry = it->second;
    tracked->push_back(i);
    if (!SameRule(entry.params, check.params)) {
      // The rule changed (a reload): the old lease ends, its units go back.
      if (entry.units > 0) {
        returns->push_back(LeaseReturn{it->first, entry.params, entry.units, entry.granted_at_us});
      }
      const int64_t seen = entry.last_seen_us;
      entry = Entry{};
      entry.params = check.params;
      entry.last_seen_us = seen;
    }
    if (tick != entry.tick) {
      entry.last_tick_count = tick == entry.tick + 1 ? entry.tick_count : 0;
      entry.tick_count = 0;
      entry.tick = tick;
    }
    ++entry.tick_count;
    entry.last_seen_us = now_us;
    if (entry.units > 0 && now_us >= entry.ends_us) {
      returns->push_back(LeaseReturn{it->first, entry.params, entry.units, entry.granted_at_us});
      entry.units = 0;
    }
    if (all && i == taken && entry.units >= check.hits) {
      entry.units -= check.hits;
      Decision& decision = decisions[i];
      decision = Decision{};
      decision.allowed = true;
      decision.remaining = static_cast<uint64_t>(std::max<int64_t>(0, entry.remaining)) + entry.units;
      decision.reset_after_us =
          std::max<int64_t>(0, entry.reset_after_us - (now_us - entry.told_at_us));
      decision.at_us = now_us;
      ++taken;
    } else {
      all = false;
    }
    uint64_t size = 0;
    if (DueAsk(entry, now_us, &size)) {
      entry.asking = true;
      entry.size = size;
      LimitParams params = entry.params;
      params.charge = Charge::kIfAdmitted;
      asks->push_back(LeaseAsk{it->first, params, size});
    }
  }
  if (all && taken == checks.size()) {
    decisions_.fetch_add(taken, std::memory_order_relaxed);
    return true;
  }
  // Not every check could be decided here: the request goes to Redis whole, so the units taken
  // for its first checks go back to their leases.
  for (size_t i = 0; i < taken; ++i) {
    const size_t hash = absl::HashOf(checks[i].key);
    Shard& shard = ShardOf(hash);
    MutexLock lock(shard.mu);
    auto it = shard.entries.find(checks[i].key);
    if (it != shard.entries.end()) {
      it->second.units += checks[i].hits;
    }
  }
  return false;
}

void LeaseTable::Observed(absl::string_view key, const LimitParams& params,
                          const Decision& decision) {
  Shard& shard = ShardOf(absl::HashOf(key));
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end() || !SameRule(it->second.params, params)) return;
  it->second.remaining = static_cast<int64_t>(decision.remaining);
  it->second.reset_after_us = decision.reset_after_us;
  it->second.told_at_us = decision.at_us;
}

void LeaseTable::Granted(const LeaseAsk& ask, const Decision& decision, int64_t now_us) {
  // A fixed window may grant the part of the ask that fit (LimitCheck::partial).
  const uint64_t units = decision.granted != 0 ? std::min(decision.granted, ask.hits) : ask.hits;
  taken_.fetch_add(1, std::memory_order_relaxed);
  units_granted_.fetch_add(units, std::memory_order_relaxed);
  Shard& shard = ShardOf(absl::HashOf(ask.key));
  MutexLock lock(shard.mu);
  auto [it, inserted] = shard.entries.try_emplace(ask.key);
  Entry& entry = it->second;
  if (inserted) {
    // Forgotten meanwhile: the units are held all the same, until the lease's end.
    entry.params = ask.params;
    entry.last_seen_us = now_us;
  }
  entry.asking = false;
  if (entry.drop_grant) {
    entry.drop_grant = false;
    units_expired_.fetch_add(units, std::memory_order_relaxed);
    return;
  }
  // When the call was planned: a fixed window's units count in that window.
  const int64_t at_us = decision.at_us != 0 ? decision.at_us : now_us;
  int64_t ends_us = now_us + absl::ToInt64Microseconds(options_.life);
  if (Windowed(ask.params)) {
    const int64_t window_end = FixedWindowAt(ask.params, at_us).end_us;
    ends_us = std::min(ends_us, window_end);
    if (entry.units > 0 && FixedWindowAt(ask.params, entry.granted_at_us).end_us != window_end) {
      // Units of another window: theirs is over (or this grant's is), they cannot mix.
      units_expired_.fetch_add(entry.units, std::memory_order_relaxed);
      entry.units = 0;
    }
  }
  entry.units += units;
  entry.ends_us = ends_us;
  entry.granted_at_us = at_us;
  entry.remaining = static_cast<int64_t>(decision.remaining);
  entry.reset_after_us = decision.reset_after_us;
  entry.told_at_us = now_us;
}

void LeaseTable::Refused(const LeaseAsk& ask, const Decision* decision) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  Shard& shard = ShardOf(absl::HashOf(ask.key));
  MutexLock lock(shard.mu);
  auto it = shard.entries.find(ask.key);
  if (it == shard.entries.end()) return;
  it->second.asking = false;
  it->second.drop_grant = false;
  if (decision != nullptr) {
    it->second.remaining = static_cast<int64_t>(decision->remaining);
    it->second.reset_after_us = decision->reset_after_us;
    it->second.told_at_us = decision->at_us;
  }
}

void LeaseTable::Returned(const LeaseReturn& give_back, bool ok) {
  (ok ? units_returned_ : units_expired_).fetch_add(give_back.hits, std::memory_order_relaxed);
}

void LeaseTable::Forget(absl::string_view storage_key) {
  // Reset keys are storage keys; a fixed window's are its check's key and a window suffix.
  Drop([storage_key](absl::string_view key) { return absl::StartsWith(storage_key, key); });
}

void LeaseTable::ForgetAll() {
  Drop([](absl::string_view) { return true; });
}

void LeaseTable::Drop(const std::function<bool(absl::string_view key)>& match) {
  if (!enabled()) return;
  for (Shard& shard : shards_) {
    MutexLock lock(shard.mu);
    for (auto& [key, entry] : shard.entries) {
      if (!match(key)) continue;
      units_expired_.fetch_add(entry.units, std::memory_order_relaxed);
      entry.units = 0;
      entry.drop_grant = entry.asking;
    }
  }
}

LeaseCounters LeaseTable::counters() const {
  return LeaseCounters{taken_.load(std::memory_order_relaxed),
                       refused_.load(std::memory_order_relaxed),
                       units_granted_.load(std::memory_order_relaxed),
                       units_returned_.load(std::memory_order_relaxed),
                       units_expired_.load(std::memory_order_relaxed),
                       decisions_.load(std::memory_order_relaxed)};
}

size_t LeaseTable::keys() const {
  size_t keys = 0;
  for (const Shard& shard : shards_) {
    MutexLock lock(shard.mu);
    keys += shard.entries.size();
  }
  return keys;
}

uint64_t LeaseTable::units_held() const {
  uint64_t held = 0;
  for (const Shard& shard : shards_) {
    MutexLock lock(shard.mu);
    for (const auto& [unused_key, entry] : shard.entries) {
      held += entry.units;
    }
  }
  return held;
}

void LeaseTable::AppendMetrics(std::string* out) const {
  if (!enabled()) return;
  const LeaseCounters c = counters();
  absl::StrAppend(
      out,
      "# HELP sluice_lease_taken_total Leases of hot keys' units taken from Redis "
      "(--redis_lease_rate), and lease calls Redis refused (the budget was short)\n"
      "# TYPE sluice_lease_taken_total counter\n"
      "sluice_lease_taken_total{result=\"granted\"} ", c.taken,
      "\nsluice_lease_taken_total{result=\"refused\"} ", c.refused,
      "\n# HELP sluice_lease_units_total Units of hot keys' limits: granted to this replica's "
      "leases, given back unused (returned), not given back (expired: the give-back failed, the "
      "window they were granted in ended first, or a reset deleted their state)\n"
      "# TYPE sluice_lease_units_total counter\n"
      "sluice_lease_units_total{event=\"granted\"} ", c.units_granted,
      "\nsluice_lease_units_total{event=\"returned\"} ", c.units_returned,
      "\nsluice_lease_units_total{event=\"expired\"} ", c.units_expired,
      "\n# HELP sluice_lease_units_held Units this replica's leases hold now\n"
      "# TYPE sluice_lease_units_held gauge\n"
      "sluice_lease_units_held ", units_held(),
      "\n# HELP sluice_lease_keys Hot keys this replica tracks (at most 16,384)\n"
      "# TYPE sluice_lease_keys gauge\n"
      "sluice_lease_keys ", keys(),
      "\n# HELP sluice_lease_decisions_total Checks decided from a lease, without a Redis call\n"
      "# TYPE sluice_lease_decisions_total counter\n"
      "sluice_lease_decisions_total ", c.decisions, "\n");
}

}  // namespace sluice
