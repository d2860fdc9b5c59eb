#include "server/service/rule_series.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

std::atomic<uint64_t> next_store_id{1};

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

// What the store keeps on a config node: whose series, and the series, held (and counted in
// memo_holds_) for as long as the node lives.
struct RuleSeriesStore::Memo : NodeMemo::Value {
  Memo(uint64_t store_id, std::shared_ptr<RuleSeries> held)
      : store_id(store_id), series(std::move(held)) {
    series->memo_holds_.fetch_add(1, std::memory_order_acq_rel);
  }
  ~Memo() override { series->memo_holds_.fetch_sub(1, std::memory_order_acq_rel); }
  const uint64_t store_id;
  const std::shared_ptr<RuleSeries> series;
};

std::string ShortStatKey(absl::string_view key) {
  if (key.size() <= kMaxStatKeyBytes) {
    return std::string(key);
  }
  constexpr size_t kSuffixBytes = 17;  // '#' and 16 hex digits
  size_t keep = kMaxStatKeyBytes - kSuffixBytes;
  // Not inside a UTF-8 character: back up over continuation bytes (10xxxxxx).
  while (keep > 0 && (static_cast<unsigned char>(key[keep]) & 0xc0) == 0x80) {
    --keep;
  }
  return absl::StrCat(key.substr(0, keep), "#", absl::Hex(Fnv1a64(key), absl::kZeroPad16));
}

void OrderForPage(std::vector<std::shared_ptr<const RuleSeries>>& series) {
  struct Rank {
    bool configured;
    uint64_t hits;
    const RuleSeries* series;
  };
  // Read once each: the counters move while this sorts.
  std::vector<Rank> ranks;
  ranks.reserve(series.size());
  for (const auto& s : series) {
    ranks.push_back({s->configured(), s->value(RuleSeries::kTotalHits), s.get()});
  }
  std::vector<size_t> order(series.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&ranks](size_t a, size_t b) {
    const Rank& x = ranks[a];
    const Rank& y = ranks[b];
    if (x.configured != y.configured) {
      return x.configured;
    }
    if (x.hits != y.hits) {
      return x.hits > y.hits;
    }
    return x.series->key() < y.series->key();
  });
  std::vector<std::shared_ptr<const RuleSeries>> sorted;
  sorted.reserve(series.size());
  for (size_t i : order) {
    sorted.push_back(std::move(series[i]));
  }
  series = std::move(sorted);
}

void RuleSeries::Add(const RuleHits& hits) {
  const uint64_t values[kCounters] = {hits.total,
                                      hits.over_limit,
                                      hits.near_limit,
                                      hits.over_limit_with_local_cache,
                                      hits.within_limit,
                                      hits.shadow_mode,
                                      hits.total_negative};
  for (int i = 0; i < kCounters; ++i) {
    if (values[i] != 0) {
      counts_[static_cast<size_t>(i)].fetch_add(values[i], std::memory_order_relaxed);
    }
  }
}

RuleSeriesStore::RuleSeriesStore(Options options, const Clock& clock)
    : options_(options),
      clock_(clock),
      max_per_shard_(std::max<size_t>(1, options.max_series / kShards)),
      id_(next_store_id.fetch_add(1, std::memory_order_relaxed)),
      folded_(std::make_shared<RuleSeries>(std::string(kFoldedKey), /*configured=*/false,
                                           clock.MonotonicMicros())) {}

RuleSeriesStore::Shard& RuleSeriesStore::ShardOf(absl::string_view key) {
  return shards_[absl::HashOf(key) % kShards];
}

std::shared_ptr<RuleSeries> RuleSeriesStore::Find(Shard& shard, const std::string& key,
                                                  bool configured, int64_t now_us) {
  auto it = shard.series.find(key);
  if (it != shard.series.end()) {
    RuleSeries& series = *it->second;
    series.last_used_us_ = now_us;
    if (configured) {
      series.configured_.store(true, std::memory_order_relaxed);
    }
    return it->second;
  }
  if (!configured && shard.request_made >= max_per_shard_) {
    // At the cap: make room from series nobody used for the ttl, at most once a second.
    if (options_.ttl <= absl::ZeroDuration() || shard.swept_at_cap_us > now_us - 1000000) {
      return nullptr;
    }
    shard.swept_at_cap_us = now_us;
    Sweep(shard, now_us);
    if (shard.request_made >= max_per_shard_) {
      return nullptr;
    }
  }
  auto series = std::make_shared<RuleSeries>(key, configured, now_us);
  series->capped_ = !configured;
  shard.request_made += configured ? 0 : 1;
  shard.series.emplace(key, series);
  return series;
}

void RuleSeriesStore::Sweep(Shard& shard, int64_t now_us) {
  if (options_.ttl <= absl::ZeroDuration()) {
    return;
  }
  const int64_t ttl_us = absl::ToInt64Microseconds(options_.ttl);
  for (auto it = shard.series.begin(); it != shard.series.end();) {
    RuleSeries& series = *it->second;
    if (series.memo_holds_.load(std::memory_order_acquire) > 0) {
      series.last_used_us_ = now_us;  // counted through a node that is still in force
    } else if (it->second.use_count() == 1 && now_us - series.last_used_us_ >= ttl_us) {
      // Only the map holds it, and only under this lock can anyone get it again.
      shard.request_made -= series.capped_ ? 1 : 0;
      shard.series.erase(it++);
      expired_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    ++it;
  }
}

void RuleSeriesStore::Count(absl::string_view stat_key, const RuleHits& hits) {
  const std::string key = ShortStatKey(stat_key);
  Shard& shard = ShardOf(key);
  const int64_t now_us = clock_.MonotonicMicros();
  MutexLock lock(shard.mu);
  std::shared_ptr<RuleSeries> series = Find(shard, key, /*configured=*/false, now_us);
  if (series == nullptr) {
    folds_.fetch_add(1, std::memory_order_relaxed);
    folded_->Add(hits);
    return;
  }
  series->Add(hits);
}

void RuleSeriesStore::CountNode(const DescriptorNode& node, const RuleHits& hits) {
  // Only this class sets stat_memo, always to a Memo.
  const auto* memo = static_cast<const Memo*>(node.stat_memo.Get());
  if (memo != nullptr && memo->store_id == id_) {
    memo->series->Add(hits);
    return;
  }
  const std::string key = ShortStatKey(node.full_key);
  Shard& shard = ShardOf(key);
  std::unique_ptr<Memo> made;
  {
    MutexLock lock(shard.mu);
    std::shared_ptr<RuleSeries> series =
        Find(shard, key, /*configured=*/true, clock_.MonotonicMicros());
    series->Add(hits);
    if (memo == nullptr) {
      // Made under the lock, so that a sweep cannot drop the series before the memo holds it.
      made = std::make_unique<Memo>(id_, std::move(series));
    }
  }
  if (made != nullptr) {
    // Another thread's memo may have been kept first: then this one is freed, letting go.
    node.stat_memo.Set(std::move(made));
  }
}

std::vector<std::shared_ptr<const RuleSeries>> RuleSeriesStore::Snapshot() {
  std::vector<std::shared_ptr<const RuleSeries>> out;
  const int64_t now_us = clock_.MonotonicMicros();
  for (Shard& shard : shards_) {
    MutexLock lock(shard.mu);
    Sweep(shard, now_us);
    out.reserve(out.size() + shard.series.size());
    for (const auto& [key, series] : shard.series) {
      out.push_back(series);
    }
  }
  return out;
}

}  // namespace sluice
