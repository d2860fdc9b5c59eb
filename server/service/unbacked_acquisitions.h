// Remembers, per storage key, the acquisitions of in-flight limits (`algorithm: concurrency`) that
// this replica answered without the backend deciding them: the failure policy answered them
// (allow, deny, or local: then the failure_mode local store holds their leases), because the
// backend could not. Envoy sends a release for every request that ends (apply_on_stream_done,
// the denied and the failure-policy-admitted ones included), and a release that reached the
// backend for such an acquisition would free a lease some other request holds there. Instead, a
// release of the key first takes one of these (UnbackedStep): nothing is given back to the backend
// for it, and a lease the local store holds is given back to that store.
//
// What it cannot know:
//   - a release sent to another replica than its acquisition: that replica has no record and its
//     backend frees a lease a running request holds (one admitted too many), until a later
//     release of the key through this replica takes the record left behind (the backend's count
//     is exact again) or one unit passes. Envoy sends both calls of a request from the
//     request's worker thread, on that worker's HTTP/2 connection to the rate-limit cluster's
//     host: when the cluster is one address (a Kubernetes Service's virtual IP), both reach the
//     replica that connection goes to, unless it was replaced in between; with one endpoint per
//     replica (a headless Service), the load balancer picks a host for each call;
//   - an acquisition whose call timed out but that the backend executed after all (a node
//     that went silent with the call on the wire, then came back): its lease is held there while
//     its release is taken here, so the key admits one fewer until that lease lapses, at most one
//     unit (under-admission). A call that timed out while the node was answering others (slow,
//     not gone: FailureReason::kTimeoutSlow) is not recorded, since the node will execute it;
//   - in a request whose checks went to several Redis nodes and one of them failed, the whole
//     call is answered by the failure policy, though the other nodes may have executed theirs:
//     recorded all the same (under-admission, as above).
//
// Bounded: an entry is a count of acquisitions held nowhere, a count held by the local store,
// and an expiry one lease unit after the latest acquisition recorded (as long as the backend
// would have kept such a lease: past it, a release finds its lease lapsed whether the backend
// held it or not, and goes to the backend as any release does); at most `max_keys` keys
// and `max_bytes` of heap (the hash tables, each key's string and entry, as OverLimitCache
// accounts them). A new key that does not fit drops expired entries, then live ones (counted:
// their releases then reach the backend, as before this store existed); a key too large for a
// shard's share is not recorded. Each shard drops its expired entries at most once a second as it
// is used, so the store empties after an outage and Empty() lets releases skip it again.
//
// Thread-safe: sharded, one mutex per shard; Empty() is lock-free.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "server/common/clock.h"
#include "server/common/sharded_key_map.h"

namespace sluice {

class UnbackedAcquisitions {
 public:
  static constexpr size_t kDefaultMaxKeys = 100000;
  static constexpr size_t kDefaultMaxBytes = size_t{16} << 20;
  // How often a shard drops its expired entries, at the most.
  static constexpr int64_t kSweepIntervalUs = 1000000;

  // `clock` must outlive the store. Each of its shards gets an equal share of `max_keys` and of
  // `max_bytes`. REQUIRES: max_keys >= 1, max_bytes >= 1.
  UnbackedAcquisitions(const Clock& clock, size_t max_keys = kDefaultMaxKeys,
                       size_t max_bytes = kDefaultMaxBytes);

  // Records `hits` acquisitions of `key` answered without the backend; `held_locally`: the
  // failure_mode local store holds their leases. The key's entry lives until lease_us after now
  // (or longer, if it already did). REQUIRES: lease_us > 0.
  void Record(absl::string_view key, uint64_t hits, bool held_locally, int64_t lease_us);

  // What a release took.
  struct Taken {
    uint64_t unheld = 0;  // acquisitions whose lease is held nowhere
    uint64_t local = 0;   // acquisitions whose lease the local store holds
    uint64_t total() const { return unheld + local; }
  };
  // Takes up to `hits` of `key`'s live acquisitions for a release, those held locally first; an
  // entry left with none is dropped.
  Taken Take(absl::string_view key, uint64_t hits);

  // Whether no key is held (expired ones not yet dropped count as held): a release need not look.
  // Lock-free: one relaxed load, the only cost a release pays while nothing is held.
  bool Empty() const { return map_.keys() == 0; }

  using Usage = ShardedKeyMapUsage;  // keys, bytes (at most max_bytes), evictions
  Usage TotalUsage() const { return map_.TotalUsage(); }
  // Acquisitions recorded, and taken by releases, since the start.
  uint64_t recorded() const { return recorded_.load(std::memory_order_relaxed); }
  uint64_t released() const { return released_.load(std::memory_order_relaxed); }
  // sluice_unbacked_acquisitions_keys, _bytes, _max_bytes (gauges), _evictions_total,
  // _recorded_total and _released_total.
  void AppendMetrics(std::string* out) const;

 private:
  struct Entry {
    uint64_t unheld = 0;
    uint64_t local = 0;
    int64_t until_us = 0;
  };
  using Map = ShardedKeyMap<Entry>;

  // Drops the shard's expired entries (and always when `force`, else at most once per
  // kSweepIntervalUs).
  void Sweep(Map::Shard& shard, int64_t now_us, bool force)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);

  const Clock& clock_;
  Map map_;
  std::atomic<uint64_t> recorded_{0};
  std::atomic<uint64_t> released_{0};
};

}  // namespace sluice
