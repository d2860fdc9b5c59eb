// The per-rule hit counters (envoyproxy/ratelimit's per-rule stats: total_hits, over_limit, ...),
// one series per stat key, bounded against callers that choose their own values (a
// detailed_metric rule, value_to_metric, or a request's limit override makes one key per request
// value) in three ways:
//   - bytes: a stat key longer than kMaxStatKeyBytes is shown shortened (ShortStatKey), so a
//     label value is never larger than that;
//   - number: keys made from request values get series of their own up to `max_series`; past
//     that they count under kFoldedKey. The config's own keys (a node's full_key, counted through
//     CountNode) always get theirs: a flood of request values cannot fold them;
//   - time: a series unused for `ttl` is dropped, which frees its place under the cap. A series
//     counted through a node's memo is in use while the node's config is.
// The counters are plain atomics kept here, not prometheus-cpp families: a scrape copies
// pointers out one shard at a time (Snapshot) and renders outside every lock, so counting, and
// making a new series, waits for a scrape at most as long as one shard's copy.
// Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"
#include "server/config/config.h"

namespace sluice {

// The hits one descriptor put on its rule, with envoyproxy/ratelimit's per-rule arithmetic
// (respond.h says how each is counted).
struct RuleHits {
  uint64_t total = 0;
  uint64_t within_limit = 0;
  uint64_t near_limit = 0;
  uint64_t over_limit = 0;
  uint64_t over_limit_with_local_cache = 0;
  uint64_t shadow_mode = 0;
  // Hits a refund (is_negative_hits) gave back: upstream's total_negative_hits. A refund counts
  // here only, in none of the others.
  uint64_t total_negative = 0;
  // Sluice's, beside upstream's: the hits a denied descriptor was charged all the same (a rule
  // that charges always, decided by a backend). Counted by algorithm, not here.
  uint64_t charged_over_limit = 0;
};

// The longest stat key shown whole, in bytes.
inline constexpr size_t kMaxStatKeyBytes = 256;

// `key` if it is at most kMaxStatKeyBytes long; otherwise its first bytes (cut at a UTF-8
// character boundary), '#' and 16 hex digits of a 64-bit FNV-1a hash of the whole key, at most
// kMaxStatKeyBytes in all. The hash is the same in every process, so replicas name a long key
// alike, and two long keys that share their first 239 bytes stay apart.
std::string ShortStatKey(absl::string_view key);

// The counters of one stat key.
class RuleSeries {
 public:
  enum Counter : int {
    kTotalHits,
    kOverLimit,
    kNearLimit,
    kOverLimitWithLocalCache,
    kWithinLimit,
    kShadowMode,
    kTotalNegativeHits,
  };
  static constexpr int kCounters = 7;

  RuleSeries(std::string key, bool configured, int64_t now_us)
      : key_(std::move(key)), configured_(configured), last_used_us_(now_us) {}

  const std::string& key() const { return key_; }
  // Whether a config node's key (CountNode) rather than one made from request values.
  bool configured() const { return configured_.load(std::memory_order_relaxed); }
  uint64_t value(Counter counter) const {
    return counts_[counter].load(std::memory_order_relaxed);
  }
  void Add(const RuleHits& hits);

 private:
  friend class RuleSeriesStore;

  const std::string key_;
  std::atomic<bool> configured_;
  std::array<std::atomic<uint64_t>, kCounters> counts_{};
  // Node memos holding this series: while any does, it is in use.
  std::atomic<int> memo_holds_{0};
  // Under the store's shard lock: when last counted outside a memo (or seen held by one), and
  // whether it takes a place under the cap.
  int64_t last_used_us_;
  bool capped_ = false;
};

// Orders series for a page that may not hold them all: the config's keys first, then the most
// hit (total_hits), then by key.
void OrderForPage(std::vector<std::shared_ptr<const RuleSeries>>& series);

class RuleSeriesStore {
 public:
  // The stat key that the counters of keys past the cap fold into.
  static constexpr absl::string_view kFoldedKey = "_folded";

  struct Options {
    // Keys made from request values with series of their own, about (16 shards of a sixteenth
    // each). At least 16.
    size_t max_series = 10000;
    // A series unused this long is dropped. Zero: never.
    absl::Duration ttl = absl::Minutes(10);
  };

  // `clock` must outlive the store.
  explicit RuleSeriesStore(Options options, const Clock& clock = RealClock::Get());
  RuleSeriesStore(const RuleSeriesStore&) = delete;
  RuleSeriesStore& operator=(const RuleSeriesStore&) = delete;

  // Adds `hits` to the series of `stat_key`, a key made from request values: made on first use
  // while under the cap, else the folded series (and the fold is counted).
  void Count(absl::string_view stat_key, const RuleHits& hits);
  // Adds `hits` to the series of node.full_key, a key of the config's: always its own series,
  // found once and then kept on the node (node.stat_memo), so later calls take no lock. A node
  // whose memo another store set first is looked up every time.
  void CountNode(const DescriptorNode& node, const RuleHits& hits);

  // Every series with a key of its own (not the folded one), after dropping the expired ones.
  // The series stay valid while the pointers are held, whatever is dropped meanwhile.
  std::vector<std::shared_ptr<const RuleSeries>> Snapshot();
  const RuleSeries& folded() const { return *folded_; }
  // Lookups folded past the cap; series dropped for want of use.
  uint64_t folds() const { return folds_.load(std::memory_order_relaxed); }
  uint64_t expired() const { return expired_.load(std::memory_order_relaxed); }

 private:
  struct Memo;
  struct Shard {
    Mutex mu;
    absl::flat_hash_map<std::string, std::shared_ptr<RuleSeries>> series ABSL_GUARDED_BY(mu);
    // Series made through Count (not configured), which the cap bounds.
    size_t request_made ABSL_GUARDED_BY(mu) = 0;
    // When the shard was last swept for being at the cap (never: long enough ago that the
    // first sweep is due; compared as now - 1 s, which cannot overflow).
    int64_t swept_at_cap_us ABSL_GUARDED_BY(mu) = INT64_MIN;
  };

  // The series of `key` (already short), made if absent unless it is a request key and the
  // shard is at its cap (then null). `configured` marks it as a config's key.
  std::shared_ptr<RuleSeries> Find(Shard& shard, const std::string& key, bool configured,
                                   int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Drops the shard's series unused for the ttl and held by nothing else.
  void Sweep(Shard& shard, int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  Shard& ShardOf(absl::string_view key);

  static constexpr size_t kShards = 16;
  const Options options_;
  const Clock& clock_;
  const size_t max_per_shard_;
  // Tells apart the stores of one process (tests make several), whose series a node's memo
  // must not mix up; never reused, unlike an address.
  const uint64_t id_;
  Shard shards_[kShards];
  const std::shared_ptr<RuleSeries> folded_;
  std::atomic<uint64_t> folds_{0};
  std::atomic<uint64_t> expired_{0};
};

}  // namespace sluice
