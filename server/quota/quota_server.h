// The Rate Limit Quota Service (RLQS) of one replica: Envoys stream usage reports per bucket,
// and each gets, per bucket, a local token bucket that is its max-min fair share of the global
// limit the config sets for that bucket (fair_share.h), so that the Envoys sharing a bucket
// admit the limit between them without asking anyone per request.
//
// The protocol, as Envoy's rate_limit_quota filter speaks it (its source is the specification:
// envoyproxy/envoy source/extensions/filters/http/rate_limit_quota/, 2026; docs/rlqs.md):
//   - A stream is bound to the domain of its first report, which must name one; later reports
//     may repeat it (Envoy does, in every message) or leave it empty (the API asks it only in
//     the first); another domain ends the stream with INVALID_ARGUMENT. A report with no bucket
//     (Envoy's tick while it holds none) is accepted.
//   - A bucket's first report on a stream subscribes the stream to it and is answered at once
//     with its share of the demands known then, the others' shares here lowered at once when
//     they leave no room for it (newcomer_waits: it waits for the next rebalance instead, with
//     only the room left, DENY_ALL when there is none). Envoy's first report of a new bucket has a
//     time_elapsed of 0 s and measures nothing (subscription.h says how demand is measured: on
//     this server's clock, since Envoy truncates time_elapsed to whole seconds).
//   - Envoy reports every bucket it holds on every tick, forever, and forgets one only when told
//     to (abandon_action): global_client_impl.cc's buildReports walks its whole bucket cache,
//     and only onQuotaResponseImpl's abandon_action erases an entry. So a subscription is
//     abandoned after abandon_idle_reports reports in a row with no request, or when not
//     reported for abandon_after_intervals of its intervals (a client that stops reporting a
//     bucket). A bucket whose latest report counted requests is busy, and stays whatever the
//     phase of Envoy's timer it was born at (an abandoned bucket is erased, and its traffic
//     falls to no_assignment_behavior, allow-all by default): it is abandoned only once silent
//     for abandon_after_intervals of the longest interval (a minute), which an Envoy, reporting
//     every bucket at every tick, never is. When traffic returns, Envoy creates the bucket
//     again and it is answered at once. A closed stream's demand leaves at once.
//   - Every rebalance (Tick) recomputes every bucket's shares and sends a subscriber an
//     assignment when its share moved past `hysteresis`, when it is about to expire, or when
//     the rule changed; and, when the shares held add up to more than 2% over (under) what they
//     should, every share that went down (up); and when its burst is due or no longer
//     (HoldsBurst). A share is sent as Envoy applies it (envoy_assignment.h): a token bucket
//     within 0.5% of the share, whose comparison fields change whenever it does, a TTL of whole
//     seconds, never an action Envoy skips. Its max_tokens is the share's part of the rule's
//     burst only for a settled subscription whose demand the share meets, and a tenth of a
//     second of the share (at least two tokens) otherwise: Envoy starts every bucket it builds
//     full, so a larger burst would be admitted at once by each new bucket and each share of a
//     denied subscriber that moves.
//   - An assignment lives assignment_ttl_intervals of the subscriber's report intervals (at
//     least min_ttl_seconds, and never less than Envoy's reconnect, its 5 s report tick, plus
//     a rebalance) and is renewed at half its life, so that it outlives a missed report and a
//     reconnect: a replica that stops (a rolling restart) just ends its streams, and each Envoy
//     keeps its assignment until it has reconnected elsewhere. A renewal sends the token bucket
//     last sent exactly as it was (envoy_assignment.h), which Envoy keeps with its tokens.
//   - A report is bounded as an RLS request is (domain, key and value at most max_key_bytes,
//     at most max_pairs pairs: INVALID_ARGUMENT), and time_elapsed is held to
//     [0, max_time_elapsed_us] (a negative one is INVALID_ARGUMENT).
// Bounds, each checked before the state is allocated; never the process: streams in all and per
// peer address (a stream past them is refused, RESOURCE_EXHAUSTED naming the flag); a stream's
// own buckets and bytes (past them the stream is ended so); subscriptions in all and bytes per
// peer and in all, which a stream shares with others (past them a new bucket is left unanswered
// and counted, the stream goes on, and a later report of it is subscribed once there is room: an
// Envoy is not ended for what other clients hold). A bucket's id is kept once, as its canonical
// key (bucket_key.h); each stream is charged for the ids it holds, the process once per bucket.
//
// Demand beyond this replica (other replicas' streams) comes from a RemoteDemand, when given:
// every rebalance publishes this replica's demands of the buckets that have a rate and reads the
// others' (outside the lock), and shares are computed over every demand. A bucket whose exchange
// has not succeeded for remote_stale_after_us is answered by its failure mode (its domain's,
// else QuotaOptions::failure_mode) until it does: allow, ALLOW_ALL; deny, DENY_ALL; local, shares
// over the other replicas' demands as last known. Buckets fail alone: one domain's trouble
// leaves another's shares in force.
//
// Thread-safe: one mutex over all streams and buckets; responses are handed to the streams'
// sinks after it is released; the page and the per-rule gauges come from a snapshot taken at
// each rebalance (quota_view.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"
#include "server/common/mutex.h"
#include "server/common/snapshot_publisher.h"
#include "server/config/config_store.h"
#include "server/config/failure_mode.h"
#include "server/quota/bucket_key.h"
#include "server/quota/quota_rule.h"
#include "server/quota/quota_view.h"
#include "server/quota/subscription.h"

namespace sluice::quota {

using Reports = envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;
using QuotaResponse = envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;

struct QuotaOptions {
  // A share is sent again only when it moved by more than this fraction.
  double hysteresis = 0.1;
  // How many of its report intervals an assignment lives (at least min_ttl_seconds, and at
  // least kEnvoyReconnectUs plus rebalance_interval_us, rounded up to whole seconds).
  int assignment_ttl_intervals = 4;
  int64_t min_ttl_seconds = 3;
  // How often Tick runs (--rlqs_rebalance_interval).
  int64_t rebalance_interval_us = 1'000'000;
  // A new subscriber of a bucket whose shares are held gets only the room they leave (DENY_ALL
  // when none) until the next rebalance, instead of its fair share at once with the others
  // lowered at once (--rlqs_newcomer_waits).
  bool newcomer_waits = false;
  // Abandoned: a subscription reported this many times in a row with no request, or not
  // reported for this many of its intervals (of Subscription::kMaxIntervalUs when busy).
  uint32_t abandon_idle_reports = 3;
  int abandon_after_intervals = 3;
  size_t max_streams = 10000;
  size_t max_streams_per_peer = 100;
  size_t max_buckets_per_stream = 10000;
  // (stream, bucket) pairs held in all.
  size_t max_subscriptions = 1000000;
  // Bytes of RLQS state in all, per peer address and per stream (see above).
  size_t max_bytes = size_t{256} << 20;
  size_t max_peer_bytes = size_t{64} << 20;
  size_t max_stream_bytes = size_t{16} << 20;
  // Longest domain, bucket key or value, and most pairs in one bucket (as RLS bounds a
  // descriptor).
  size_t max_key_bytes = 1024;
  size_t max_pairs = 32;
  // time_elapsed above this is taken as this.
  int64_t max_time_elapsed_us = int64_t{3600} * 1'000'000;
  // What answers a bucket whose exchange fails, for domains without their own failure_mode.
  FailureMode failure_mode = FailureMode::kAllow;
  // With a RemoteDemand: how long a bucket may go without a successful exchange before its
  // failure mode answers.
  int64_t remote_stale_after_us = 2'500'000;
  // With a RemoteDemand: the most buckets of one domain exchanged per rebalance, the most
  // demanded first (the rest keep their last exchange, and go stale if left out too long).
  size_t exchange_max_buckets_per_domain = 10000;
  // Buckets on the page (the most demanded), and whether it shows descriptor values.
  size_t page_buckets = 1000;
  bool page_values = false;
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
  // Publishes this replica's demands of `buckets` (grouped by domain) and returns, per bucket in
  // order, the other replicas' streams' demands, or nullopt for a bucket whose exchange failed
  // (then its failure mode answers once it has failed long enough). Called on the rebalance
  // thread, without the server's lock; may block up to its own deadline.
  virtual std::vector<std::optional<std::vector<double>>> Exchange(
      const std::vector<Bucket>& buckets) = 0;
};

class QuotaServer {
 public:
  using StreamId = uint64_t;
  // How long an Envoy whose stream ended waits to open another: its next report tick
  // (global_client_impl.cc onSendReportsTimer reopens a closed stream; the timer fires every 5 s,
  // filter_persistence.cc initTlsStore). An assignment must outlive it and a rebalance.
  static constexpr int64_t kEnvoyReconnectUs = 5'000'000;
  // Receives the responses for one stream; called without the server's lock held, one call at
  // a time, possibly just after Close (the sink must then drop what it gets). Must not block.
  using Sink = absl::AnyInvocable<void(QuotaResponse)>;

  QuotaServer(const ConfigStore& config, QuotaOptions options, RemoteDemand* remote = nullptr);
  QuotaServer(const QuotaServer&) = delete;
  QuotaServer& operator=(const QuotaServer&) = delete;

  const QuotaOptions& options() const { return options_; }

  // A new stream from `peer` (the client's address without its port), or RESOURCE_EXHAUSTED
  // past max_streams or max_streams_per_peer.
  absl::StatusOr<StreamId> Open(Sink sink, absl::string_view peer = "");
  // One report of `stream` at now_us (monotonic microseconds). A non-OK status ends the stream
  // (the caller finishes it with that status and calls Close).
  absl::Status Report(StreamId stream, const Reports& reports, int64_t now_us);
  // The stream is gone: its demand leaves every bucket at once, and its state is freed.
  void Close(StreamId stream);
  // One rebalance at now_us: quiet subscriptions abandoned, demands exchanged, shares
  // recomputed, moved or expiring assignments sent, the view snapshot taken.
  void Tick(int64_t now_us);

  // With a RemoteDemand, a new bucket, or one with a new subscriber, is exchanged early, twice
  // (50 ms and 300 ms after), and its shares recomputed then, so that replicas whose Envoys
  // create a bucket at once learn of each other's demand before the next rebalance, and others
  // learn of a newcomer at their next one. When the next of those is due (INT64_MAX: none);
  // ExchangeFresh(now_us) does the ones due by now_us.
  int64_t FreshExchangeDueUs() const;
  void ExchangeFresh(int64_t now_us);
  // Called (without the server's lock) after a report that subscribed a stream to a bucket,
  // with a RemoteDemand: FreshExchangeDueUs moved earlier. May be empty.
  using FreshHook = std::function<void()>;
  void SetFreshBucketHook(FreshHook hook);

  struct Usage {
    size_t streams = 0;
    size_t peers = 0;
    size_t buckets = 0;        // distinct buckets subscribed
    size_t subscriptions = 0;  // (stream, bucket) pairs
    size_t bytes = 0;          // RLQS state, as budgeted
    uint64_t reports = 0;
    uint64_t assignments[3] = {};  // ALLOW_ALL, DENY_ALL, token bucket
    uint64_t abandons = 0;
    uint64_t refused = 0;  // streams ended or refused for a bad input or a bound
    // New buckets left unanswered by a shared bound: subscriptions, a peer's bytes, all bytes.
    uint64_t buckets_refused[3] = {};
    uint64_t exchange_failures = 0;  // bucket exchanges with other replicas that failed
  };
  Usage TotalUsage() const;
  // sluice_rlqs_* in the Prometheus text format.
  void AppendMetrics(std::string* out) const;
  // The live buckets for people (GET /rlqs), as of the last rebalance (quota_view.h).
  std::string Describe() const;

 private:
  struct Bucket;

  // A bucket's name: views into the Bucket itself (the map's key) or into a report (a lookup).
  struct BucketName {
    absl::string_view domain;
    absl::string_view key;
    bool operator==(const BucketName& o) const { return domain == o.domain && key == o.key; }
    template <typename H>
    friend H AbslHashValue(H h, const BucketName& n) {
      return H::combine(std::move(h), n.domain, n.key);
    }
  };

  struct Bucket {
    std::string domain;
    std::string key;  // BucketKey: the id, once
    QuotaRule rule;
    uint64_t matched_generation = 0;  // the config (generation_) the rule was matched in
    // A rematch (Rematch) gave another answer since the last rebalance, which sends it to every
    // subscriber and clears this.
    bool rule_changed = false;
    // The subscribers, each with its subscription (owned by its stream; stable).
    std::vector<std::pair<StreamId, Subscription*>> subscribers;
    // The other replicas' demands, as the last exchange that worked returned them, and when.
    std::vector<double> remote;
    int64_t remote_at_us = 0;
    int64_t created_us = 0;
    // Since when it is new, or has a new subscriber, and the early exchanges done since
    // (ExchangeFresh).
    int64_t fresh_since_us = 0;
    uint8_t fresh_exchanges = 0;
    size_t bytes = 0;  // what the bucket costs, charged to each stream that holds it
  };

  struct Peer {
    size_t streams = 0;
    size_t bytes = 0;
  };

  struct Stream {
    std::shared_ptr<Sink> sink;
    std::string domain;  // empty until the first report
    std::string peer_name;
    Peer* peer = nullptr;  // in peers_ (node map: stable)
    absl::node_hash_map<Bucket*, Subscription> subscriptions;
    size_t bytes = 0;
  };

  // Responses to deliver once mu_ is released: each stream's, gathered into one response.
  using Outbox = absl::flat_hash_map<StreamId, std::pair<std::shared_ptr<Sink>, QuotaResponse>>;

  absl::Status ReportLocked(StreamId id, const Reports& reports, int64_t now_us, Outbox& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bounds a stream shares with others (see Subscribe).
  enum class SharedBound : uint8_t { kNone = 0, kSubscriptions, kPeerBytes, kBytes };
  static absl::string_view SharedBoundText(SharedBound bound);
  // Matches `bucket`'s rule again in `config` if it was matched in an older one (generation_),
  // marking it changed when the answer differs.
  void Rematch(const Config* config, Bucket& bucket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Subscribes `stream` to bucket `key` of its domain (created if new, its rule matched in
  // `config`). An error naming the bound when one of the stream's own refuses it (the stream
  // ends); {null, null} with `*shared` set when one shared with other streams does (the bucket is
  // left unanswered, the stream goes on, and a later report of the bucket tries again).
  absl::StatusOr<std::pair<Bucket*, Subscription*>> Subscribe(StreamId id, Stream& stream,
                                                              const Config* config,
                                                              std::string key, int64_t now_us,
                                                              SharedBound* shared)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the subscription of `stream` to `bucket` (and the bucket with its last subscriber).
  void Unsubscribe(StreamId id, Stream& stream, Bucket* bucket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `stream` an abandon of `bucket` and unsubscribes it.
  void Abandon(StreamId id, Stream& stream, Bucket* bucket, Outbox& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The config in force, advancing generation_ when it changed.
  std::shared_ptr<const Config> CurrentConfig() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Shares of `bucket` among its subscribers (in subscribers order), over their demands and the
  // remote ones.
  static std::vector<double> Shares(const Bucket& bucket, double rate);
  // Whether `sub`, assigned `share`, is sent its part of the rule's burst (else a lean one:
  // kLeanBurstSeconds of its share, at least kLeanMinTokens). Envoy starts every token bucket
  // it builds full (a replacement too, whenever a whole token of it was left:
  // envoy_assignment.h), so a burst sent is admitted at once by a subscriber that asks more
  // than its share, at every share that moves, and by every passing subscription (traffic
  // moving between buckets, a bucket not measured yet). It is sent only to a subscription that
  // settled (Subscription::settled) and whose demand its share meets (within kBurstBelowShare):
  // one whose tokens wait for a burst the rule allows.
  static bool HoldsBurst(const Subscription& sub, double share);
  // The shortest TTL an assignment gets: min_ttl_seconds, and never under Envoy's reconnect
  // plus a rebalance (kEnvoyReconnectUs).
  int64_t MinTtlSeconds() const;
  // The rule a bucket is answered by at now_us: its own, or when its exchange is stale, what
  // the failure mode says.
  QuotaRule Effective(const Config* config, const Bucket& bucket, int64_t now_us) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds to `out` an assignment of `rule` (`share` when it divides) to subscription `sub` of
  // `stream` to `bucket`.
  void Assign(StreamId stream, Subscription& sub, const Bucket& bucket, const QuotaRule& rule,
              double share, int64_t now_us, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  QuotaResponse::BucketAction* AddAction(StreamId stream, const Bucket& bucket, Outbox& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbandonQuiet(int64_t now_us, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<RemoteDemand::Bucket> ToExchange() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Rebalance(int64_t now_us, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One bucket of a rebalance: its shares recomputed and those that moved sent; its gauges and
  // staleness added to `view` (when not null). Its demand, every replica's.
  double RebalanceBucket(const Config* config, Bucket& bucket, int64_t now_us, Outbox& out,
                         QuotaView* view) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores what an exchange returned (`exchanged`, taken) for the buckets `published`, counting
  // its failures; the buckets updated (those still here).
  std::vector<Bucket*> ApplyExchange(const std::vector<RemoteDemand::Bucket>& published,
                                     std::vector<std::optional<std::vector<double>>>& exchanged,
                                     int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What this replica publishes of `bucket`: its subscribers' demands.
  static RemoteDemand::Bucket Publish(const Bucket& bucket);
  // Hands `out` to the sinks. Called without mu_.
  void Deliver(Outbox out) ABSL_LOCKS_EXCLUDED(mu_);
  // What a subscription costs on the heap, besides its bucket's bytes.
  static size_t SubscriptionBytes();
  static size_t BucketBytes(absl::string_view domain, absl::string_view key);

  const ConfigStore& config_;
  const QuotaOptions options_;
  RemoteDemand* const remote_;

  mutable Mutex mu_;
  // Serializes deliveries, so that one stream's responses reach its sink in order.
  Mutex deliver_mu_;
  StreamId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<StreamId, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<BucketName, std::unique_ptr<Bucket>> buckets_ ABSL_GUARDED_BY(mu_);
  size_t subscriptions_ ABSL_GUARDED_BY(mu_) = 0;
  // Buckets new or with a new subscriber, not yet exchanged early twice (with a RemoteDemand);
  // whether a report added one.
  absl::flat_hash_set<Bucket*> fresh_ ABSL_GUARDED_BY(mu_);
  bool fresh_added_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<FreshHook> fresh_hook_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // When Tick last looked whether to give the heap's free pages back.
  int64_t trimmed_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refusal_logged_us_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<int64_t>::min() / 2;
  // The config last seen, held so that its address cannot be reused by another, and its
  // generation (buckets remember the one their rule was matched in).
  std::shared_ptr<const Config> config_seen_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  Usage usage_ ABSL_GUARDED_BY(mu_);
  SnapshotPublisher<QuotaView> view_;
};

}  // namespace sluice::quota
