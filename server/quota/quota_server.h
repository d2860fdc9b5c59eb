// The Rate Limit Quota Service (RLQS) of one replica: Envoys stream usage reports per bucket,
// and each gets, per bucket, a local token bucket that is its max-min fair share of the global
// limit the config sets for that bucket (fair_share.h), so that the Envoys sharing a bucket
// admit the limit between them without asking anyone per request.
//
// The protocol, as this server plays it (one stream per Envoy; envoy/service/rate_limit_quota):
//   - A stream is bound to the domain of its first report. A first report without a domain, a
//     later one naming another, a BucketId with no pairs, more than max_pairs, an empty key or
//     value, a domain, key or value longer than max_key_bytes, a time_elapsed of 0 or less, or
//     a report without buckets end the stream with INVALID_ARGUMENT; a stream
//     past max_buckets_per_stream, or one whose new bucket would pass max_subscriptions (all
//     streams' buckets together), ends with RESOURCE_EXHAUSTED, and a stream past max_streams
//     is refused with it.
//   - A bucket is matched against the domain's descriptor tree (bucket_match.h) with the config
//     in force: no rule, or an unlimited or shadow-mode one, is a blanket ALLOW_ALL; a limit of 0
//     DENY_ALL; otherwise the rule's limit per period is the global rate L (requests per second:
//     limit / period; a node with several rules takes the slowest).
//   - Demand: (allowed + denied) / time_elapsed over the bucket's last three reports from
//     that stream (Envoy reports whole seconds: one report is a coarse measure).
//   - The first report of a bucket on a stream is answered at once with its share of the demands
//     known then. Every rebalance (Tick) recomputes every bucket's shares and sends a stream an
//     assignment only when its share moved past `hysteresis` (Envoy rebuilds its bucket full on
//     every change), when it is about to expire, or when the rule changed; and, when the shares
//     held add up to more than 2% over (under) what they should, every share that went down
//     (up).
//   - An assignment lives assignment_ttl_intervals report intervals of its stream (at least
//     min_ttl); a bucket not reported for abandon_after_intervals intervals is abandoned
//     (AbandonAction) and its demand leaves the pool; a closed stream's demand leaves at once.
//   - Shutdown sends every subscribed bucket an assignment with TTL 0 (the protocol's "before
//     restart": Envoy falls back to its expired-assignment behaviour).
// Demand beyond this replica (other replicas' streams) comes from a RemoteDemand, when given:
// every rebalance publishes this replica's demands and reads the others' (outside the lock),
// shares are computed over every demand, and this replica's subscribers get theirs (a new
// subscriber between two rebalances is answered with the other replicas' demands of the last).
// When the exchange fails, the bucket's failure mode (its domain's, else
// QuotaOptions::failure_mode) answers until it works again: allow, ALLOW_ALL; deny, DENY_ALL;
// local, shares over the other replicas' demands as last known.
//
// Thread-safe: one mutex over all streams and buckets; responses are handed to the streams'
// sinks after it is released.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"
#include "server/common/mutex.h"
#include "server/config/config_store.h"
#include "server/config/failure_mode.h"

namespace sluice::quota {

using Reports = envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;
using QuotaResponse = envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;

struct QuotaOptions {
  // A share is sent again only when it moved by more than this fraction.
  double hysteresis = 0.1;
  // How many report intervals an assignment lives, and after how many without a report a
  // bucket is abandoned.
  int assignment_ttl_intervals = 3;
  int abandon_after_intervals = 3;
  // The shortest TTL given, whatever the interval.
  absl::Duration min_ttl = absl::Seconds(3);
  size_t max_buckets_per_stream = 10000;
  size_t max_streams = 10000;
  // (stream, bucket) pairs held in all: a flood of streams each at its bucket bound stops here.
  size_t max_subscriptions = 1000000;
  // Longest domain, bucket key or value, and most pairs in one bucket (as RLS bounds a
  // descriptor): what one subscription can make the server hold.
  size_t max_key_bytes = 1024;
  size_t max_pairs = 32;
  // What answers while the RemoteDemand fails, for domains without their own failure_mode.
  FailureMode failure_mode = FailureMode::kAllow;
};

// What other replicas' streams ask of a bucket, for the shares (multi-replica deployments).
class RemoteDemand {
 public:
  struct Bucket {
    std::string domain;
    std::string key;            // BucketKey
    std::vector<double> local;  // this replica's streams' demands, requests a second
  };
  virtual ~RemoteDemand() = default;
  // Publishes this replica's demands of `buckets` and returns, per bucket in order, the other
  // replicas' streams' demands; an error when that could not be done (then the failure mode
  // answers). Called on the rebalance thread, without the server's lock; may block briefly.
  virtual absl::StatusOr<std::vector<std::vector<double>>> Exchange(
      const std::vector<Bucket>& buckets) = 0;
};

// The canonical key of a bucket: its pairs sorted by key, each as "<len>:<key><len>:<value>".
std::string BucketKey(const envoy::service::rate_limit_quota::v3::BucketId& bucket);

class QuotaServer {
 public:
  using StreamId = uint64_t;
  // Receives the responses for one stream; called without the server's lock held, one call at
  // a time, possibly just after Close (the sink must then drop what it gets). Must not block.
  using Sink = absl::AnyInvocable<void(QuotaResponse)>;

  QuotaServer(const ConfigStore& config, QuotaOptions options, RemoteDemand* remote = nullptr);
  QuotaServer(const QuotaServer&) = delete;
  QuotaServer& operator=(const QuotaServer&) = delete;

  // A new stream, or RESOURCE_EXHAUSTED past max_streams.
  absl::StatusOr<StreamId> Open(Sink sink);
  // One report of `stream` at now_us (monotonic microseconds). A non-OK status ends the stream
  // (the caller finishes it with that status and calls Close).
  absl::Status Report(StreamId stream, const Reports& reports, int64_t now_us);
  // The stream is gone: its demand leaves every bucket at once.
  void Close(StreamId stream);
  // One rebalance at now_us: shares recomputed, moved or expiring assignments sent, stale
  // buckets abandoned.
  void Tick(int64_t now_us);
  // Every subscribed bucket of every stream gets an assignment with TTL 0.
  void ExpireAll();

  struct Usage {
    size_t streams = 0;
    size_t buckets = 0;        // distinct buckets subscribed
    size_t subscriptions = 0;  // (stream, bucket) pairs
    uint64_t reports = 0;
    uint64_t assignments[3] = {};  // ALLOW_ALL, DENY_ALL, token bucket
    uint64_t abandons = 0;
    uint64_t refused = 0;  // streams ended or refused for a bad input or a bound
    uint64_t exchange_failures = 0;  // rebalances whose exchange with other replicas failed
  };
  Usage TotalUsage() const;
  // sluice_rlqs_* in the Prometheus text format.
  void AppendMetrics(std::string* out) const;
  // The live buckets for people (GET /rlqs): a summary line, then one line per bucket, the most
  // demanded first, at most `max_buckets` of them: domain and pairs, the answer (rule), this
  // replica's streams with their demands and the shares last sent, and the other replicas'
  // demands, e.g.
  //   "edge route=api tenant=t1: 100/s; here 2 (demand 20.0, 300.0; sent 20.0, 80.0); other
  //    replicas 1 (150.0)"
  std::string Describe(size_t max_buckets) const;

 private:
  enum class Kind : uint8_t { kAllowAll = 0, kDenyAll = 1, kShare = 2 };

  struct Rule {
    Kind kind = Kind::kAllowAll;
    double rate = 0;   // requests per second (kShare)
    double burst = 0;  // the rule's capacity (kShare)
    // The matched node's stat key (its full_key), for the per-rule gauges; empty without a rule.
    std::string stat_key;
    // A shadow-mode rule: answered ALLOW_ALL, `rate` kept for the gauges.
    bool shadow = false;
  };

  // One stream's view of one bucket. Small: a replica holds one per (Envoy, bucket); the
  // bucket's id lives once, in its Bucket.
  struct Subscription {
    // The last reports, oldest first: requests counted and microseconds elapsed.
    std::array<std::pair<uint64_t, int64_t>, 3> reports{};
    uint8_t report_count = 0;
    int64_t interval_us = 1'000'000;  // the stream's report interval for it, as last seen
    bool measured = false;             // a report after the first has been kept
    int64_t last_report_us = 0;
    // What it was last sent: kind and share (requests per second), when, and its TTL.
    bool assigned = false;
    Kind sent_kind = Kind::kAllowAll;
    double sent_share = 0;
    int64_t sent_us = 0;
    int64_t ttl_us = 0;

    double Demand() const;
    void AddReport(uint64_t requests, int64_t elapsed_us);
  };

  struct Stream {
    std::shared_ptr<Sink> sink;
    std::string domain;  // empty until the first report
    absl::flat_hash_map<std::string, Subscription> buckets;  // by BucketKey
  };

  struct Bucket {
    std::string domain;
    std::string key;  // BucketKey
    envoy::service::rate_limit_quota::v3::BucketId id;
    Rule rule;
    const Config* matched_with = nullptr;  // the config the rule was matched in
    std::vector<StreamId> subscribers;
    // The other replicas' demands, as the last exchange that worked returned them.
    std::vector<double> remote;
  };

  // Responses to deliver once mu_ is released: each stream's, gathered into one response.
  using Outbox = absl::flat_hash_map<StreamId, std::pair<std::shared_ptr<Sink>, QuotaResponse>>;

  // The rule of bucket `id` of `domain` in `config`.
  static Rule MatchRule(const Config* config, const std::string& domain,
                        const envoy::service::rate_limit_quota::v3::BucketId& id);
  // Shares of `bucket` among its subscribers (in Bucket::subscribers order), over their
  // demands and the remote ones.
  std::vector<double> Shares(const Bucket& bucket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds to `out` an assignment of `kind`/`share` for subscription `sub` of `stream` to bucket
  // `id`.
  void Assign(StreamId stream, Subscription& sub,
              const envoy::service::rate_limit_quota::v3::BucketId& id, const Rule& rule,
              double share, int64_t now_us, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The id of bucket `key` of `domain`, which some stream holds.
  const envoy::service::rate_limit_quota::v3::BucketId& IdOf(const std::string& domain,
                                                             const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unsubscribe(StreamId stream, const std::string& domain, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReportLocked(StreamId id, const Reports& reports, int64_t now_us, Outbox& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rule a bucket is answered by now: its own, or while the exchange fails, what the
  // failure mode says.
  Rule Effective(const Config* config, const std::string& domain, const Bucket& bucket) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbandonQuiet(int64_t now_us, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Rebalance(int64_t now_us, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands `out` to the sinks. Called without mu_.
  void Deliver(Outbox out) ABSL_LOCKS_EXCLUDED(mu_);

  // Unambiguous whatever bytes the domain holds: its length first.
  static std::string BucketsKey(const std::string& domain, const std::string& key) {
    return absl::StrCat(domain.size(), ":", domain, key);
  }

  const ConfigStore& config_;
  const QuotaOptions options_;
  RemoteDemand* const remote_;

  mutable Mutex mu_;
  // Serializes deliveries, so that one stream's responses reach its sink in order.
  Mutex deliver_mu_;
  StreamId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<StreamId, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  // By BucketsKey(domain, bucket key).
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  size_t subscriptions_ ABSL_GUARDED_BY(mu_) = 0;
  // The last exchange with the other replicas failed.
  bool exchange_failed_ ABSL_GUARDED_BY(mu_) = false;
  Usage usage_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::quota
