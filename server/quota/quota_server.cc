#include "server/quota/quota_server.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/heap_bytes.h"
#include "server/common/heap_trim.h"
#include "server/common/logging.h"
#include "server/common/saturating.h"
#include "server/common/status_macros.h"
#include "server/quota/envoy_assignment.h"
#include "server/quota/fair_share.h"

namespace sluice::quota {
namespace {

using BucketAction = QuotaResponse::BucketAction;

// How far from what they should sum to the shares a bucket's subscribers hold may drift before
// the ones that moved the other way are sent, whatever the hysteresis.
constexpr double kOverTolerance = 0.02;

// Every kTrimEveryUs a rebalance gives the heap's free pages back when it holds at least
// kTrimWhenFreeBytes free (heap_trim.h): a flood of streams that went, or of reports refused,
// would otherwise leave its memory resident.
constexpr int64_t kTrimEveryUs = 5'000'000;
constexpr size_t kTrimWhenFreeBytes = size_t{16} << 20;

// The burst a subscription holds when it is not sent its part of the rule's burst
// (HoldsBurst): this long of its share, and at least kLeanMinTokens (one token would lose the
// time it sits full between two arrivals), never more than its part of the rule's burst.
constexpr double kLeanBurstSeconds = 0.1;
constexpr double kLeanMinTokens = 2;
// A settled subscription is sent its part of the rule's burst while its demand is under this
// many times its share (it is not denied: a share met in full is its demand), and keeps it until
// its demand passes kBurstKeptBelowShare times its share.
constexpr double kBurstBelowShare = 1.1;
constexpr double kBurstKeptBelowShare = 1.2;

// With a RemoteDemand: a new bucket, or a bucket with a new subscriber, is exchanged this long
// after, and again after the second (FreshExchangeDueUs), besides the rebalances: replicas
// whose Envoys create one bucket at once learn of each other within the second delay, not a
// rebalance or two later (each would divide the limit as if alone until then), and the others
// learn of a newcomer at their next rebalance, not the one after.
constexpr int64_t kFreshExchangeAfterUs[] = {50'000, 300'000};

// At most one log line per this long for buckets refused by a shared bound.
constexpr int64_t kRefusalLogEveryUs = 10'000'000;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("RateLimitQuotaUsageReports: ", what));
}

std::string Mib(size_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); }

}  // namespace

absl::string_view QuotaServer::SharedBoundText(SharedBound bound) {
  switch (bound) {
    case SharedBound::kSubscriptions:
      return "this server holds its most RLQS stream buckets (--rlqs_max_subscriptions)";
    case SharedBound::kPeerBytes:
      return "the RLQS streams of this peer address hold their most state (--rlqs_max_peer_mib)";
    case SharedBound::kBytes:
      return "this server holds its most RLQS state (--rlqs_max_mib)";
    case SharedBound::kNone:
      break;
  }
  return "";
}

QuotaServer::QuotaServer(const ConfigStore& config, QuotaOptions options, RemoteDemand* remote)
    : config_(config), options_(options), remote_(remote) {
  view_.Store(std::make_shared<const QuotaView>());
}

bool QuotaServer::HoldsBurst(const Subscription& sub, double share) {
  if (!sub.settled()) {
    return false;
  }
  const double demand = sub.Demand();
  return demand < kBurstBelowShare * share ||
         (sub.sent.full_burst && demand < kBurstKeptBelowShare * share);
}

int64_t QuotaServer::MinTtlSeconds() const {
  const int64_t reconnect_us =
      kEnvoyReconnectUs + std::max<int64_t>(0, options_.rebalance_interval_us);
  return std::max(options_.min_ttl_seconds, (reconnect_us + 999'999) / 1'000'000);
}

size_t QuotaServer::SubscriptionBytes() {
  // Its node in the stream's map, that map's slot and control byte, and its place (twice, for a
  // vector's growth) in the bucket's subscribers.
  return HeapBlockBytes(sizeof(std::pair<Bucket* const, Subscription>)) + sizeof(void*) + 1 +
         2 * sizeof(std::pair<StreamId, Subscription*>);
}

size_t QuotaServer::BucketBytes(absl::string_view domain, absl::string_view key) {
  // The bucket, its two strings, and its slot in buckets_.
  return HeapBlockBytes(sizeof(Bucket)) + HeapBlockBytes(domain.size() + 1) +
         HeapBlockBytes(key.size() + 1) + sizeof(BucketName) + sizeof(void*) + 1;
}

absl::StatusOr<QuotaServer::StreamId> QuotaServer::Open(Sink sink, absl::string_view peer) {
  MutexLock lock(mu_);
  if (streams_.size() >= options_.max_streams) {
    ++usage_.refused;
    return absl::ResourceExhaustedError(
        absl::StrCat("this server holds its most RLQS streams (", options_.max_streams,
                     ", --rlqs_max_streams)"));
  }
  auto [peer_it, unused] = peers_.try_emplace(std::string(peer));
  if (peer_it->second.streams >= options_.max_streams_per_peer) {
    ++usage_.refused;
    if (peer_it->second.streams == 0) {
      peers_.erase(peer_it);
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("this server holds the most RLQS streams of one peer address (",
                     options_.max_streams_per_peer, ", --rlqs_max_streams_per_peer)"));
  }
  ++peer_it->second.streams;
  const StreamId id = next_id_++;
  auto stream = std::make_unique<Stream>();
  stream->sink = std::make_shared<Sink>(std::move(sink));
  stream->peer_name = std::string(peer);
  stream->peer = &peer_it->second;
  streams_.emplace(id, std::move(stream));
  return id;
}

std::shared_ptr<const Config> QuotaServer::CurrentConfig() {
  std::shared_ptr<const Config> config = config_.Get();
  if (config != config_seen_) {
    config_seen_ = config;
    ++generation_;
  }
  return config;
}

std::vector<double> QuotaServer::Shares(const Bucket& bucket, double rate) {
  std::vector<double> demands;
  demands.reserve(bucket.subscribers.size() + bucket.remote.size());
  for (const auto& [unused_id, sub] : bucket.subscribers) {
    demands.push_back(sub->DivisionDemand());
  }
  const size_t local = demands.size();
  demands.insert(demands.end(), bucket.remote.begin(), bucket.remote.end());
  std::vector<double> shares = MaxMinShares(rate, demands);
  shares.resize(local);
  return shares;
}

BucketAction* QuotaServer::AddAction(StreamId stream, const Bucket& bucket, Outbox& out) {
  auto& [sink, response] = out[stream];
  if (sink == nullptr) {
    sink = streams_.at(stream)->sink;
  }
  BucketAction* action = response.add_bucket_action();
  FillBucketId(bucket.key, action->mutable_bucket_id());
  return action;
}

void QuotaServer::Assign(StreamId stream, Subscription& sub, const Bucket& bucket,
                         const QuotaRule& rule, double share, int64_t now_us, Outbox& out) {
  BucketAction* action = AddAction(stream, bucket, out);
  const int64_t ttl_s =
      AssignmentTtlSeconds(sub.interval_us(), options_.assignment_ttl_intervals, MinTtlSeconds());
  Subscription::Sent& sent = sub.sent;
  if (rule.kind == QuotaRule::Kind::kShare && share > 0) {
    // A bucket of the share's rate, with the same part of the rule's burst when HoldsBurst,
    // else kLeanBurstSeconds of the share.
    const bool full_burst = HoldsBurst(sub, share);
    const double rule_burst = rule.burst * share / rule.rate;
    const double burst =
        full_burst ? rule_burst
                   : std::min(rule_burst, std::max(kLeanMinTokens, share * kLeanBurstSeconds));
    const EnvoyTokenBucket bucket_sent =
        EncodeShare(share, burst,
                    sent.assigned && sent.kind == rule.kind && sent.share > 0 ? &sent.bucket
                                                                                : nullptr);
    FillAssignment(&bucket_sent, false, ttl_s, action);
    sent.bucket = bucket_sent;
    sent.full_burst = full_burst;
  } else {
    // A share of 0 (nothing left) denies.
    FillAssignment(nullptr, rule.kind == QuotaRule::Kind::kAllowAll, ttl_s, action);
  }
  ++usage_.assignments[static_cast<size_t>(rule.kind)];
  sent.assigned = true;
  sent.kind = rule.kind;
  sent.share = share;
  sent.at_us = now_us;
  sent.ttl_us = ttl_s * 1'000'000;
}

absl::Status QuotaServer::Report(StreamId id, const Reports& reports, int64_t now_us) {
  Outbox out;
  absl::Status status;
  std::shared_ptr<FreshHook> hook;
  {
    MutexLock lock(mu_);
    status = ReportLocked(id, reports, now_us, out);
    if (!status.ok()) {
      ++usage_.refused;
    }
    if (fresh_added_) {
      fresh_added_ = false;
      hook = fresh_hook_;
    }
  }
  Deliver(std::move(out));
  if (hook != nullptr && *hook) {
    (*hook)();
  }
  return status;
}

void QuotaServer::SetFreshBucketHook(FreshHook hook) {
  MutexLock lock(mu_);
  fresh_hook_ = hook ? std::make_shared<FreshHook>(std::move(hook)) : nullptr;
}

int64_t QuotaServer::FreshExchangeDueUs() const {
  MutexLock lock(mu_);
  int64_t due = std::numeric_limits<int64_t>::max();
  for (const Bucket* bucket : fresh_) {
    due = std::min(due, bucket->fresh_since_us + kFreshExchangeAfterUs[bucket->fresh_exchanges]);
  }
  return due;
}

void QuotaServer::ExchangeFresh(int64_t now_us) {
  if (remote_ == nullptr) {
    return;
  }
  Outbox out;
  std::vector<RemoteDemand::Bucket> published;
  {
    MutexLock lock(mu_);
    std::vector<Bucket*> done;
    for (Bucket* bucket : fresh_) {
      if (bucket->fresh_since_us + kFreshExchangeAfterUs[bucket->fresh_exchanges] > now_us) {
        continue;
      }
      if (++bucket->fresh_exchanges == std::size(kFreshExchangeAfterUs) ||
          !bucket->rule.Divided()) {
        done.push_back(bucket);
      }
      if (bucket->rule.Divided()) {
        published.push_back(Publish(*bucket));
      }
    }
    for (Bucket* bucket : done) {
      fresh_.erase(bucket);
    }
  }
  if (published.empty()) {
    return;
  }
  // As Tick does: the exchange without the lock.
  std::vector<std::optional<std::vector<double>>> exchanged = remote_->Exchange(published);
  {
    MutexLock lock(mu_);
    const std::shared_ptr<const Config> config = CurrentConfig();
    for (Bucket* bucket : ApplyExchange(published, exchanged, now_us)) {
      RebalanceBucket(config.get(), *bucket, now_us, out, nullptr);
    }
  }
  Deliver(std::move(out));
}

std::vector<QuotaServer::Bucket*> QuotaServer::ApplyExchange(
    const std::vector<RemoteDemand::Bucket>& published,
    std::vector<std::optional<std::vector<double>>>& exchanged, int64_t now_us) {
  std::vector<Bucket*> updated;
  for (size_t i = 0; i < published.size(); ++i) {
    if (i >= exchanged.size() || !exchanged[i].has_value()) {
      ++usage_.exchange_failures;
      continue;
    }
    auto it = buckets_.find(BucketName{published[i].domain, published[i].key});
    if (it != buckets_.end()) {
      it->second->remote = std::move(*exchanged[i]);
      it->second->remote_at_us = now_us;
      updated.push_back(it->second.get());
    }
  }
  return updated;
}

RemoteDemand::Bucket QuotaServer::Publish(const Bucket& bucket) {
  RemoteDemand::Bucket published;
  published.domain = bucket.domain;
  published.key = bucket.key;
  for (const auto& [unused_id, sub] : bucket.subscribers) {
    published.local.push_back(sub->DivisionDemand());
  }
  return published;
}

void QuotaServer::Rematch(const Config* config, Bucket& bucket) {
  if (bucket.matched_generation == generation_) {
    return;
  }
  QuotaRule rule = MatchQuotaRule(config, bucket.domain, bucket.key);
  bucket.rule_changed = bucket.rule_changed || !rule.SameAnswer(bucket.rule);
  bucket.rule = std::move(rule);
  bucket.matched_generation = generation_;
}

absl::StatusOr<std::pair<QuotaServer::Bucket*, Subscription*>> QuotaServer::Subscribe(
    StreamId id, Stream& stream, const Config* config, std::string key, int64_t now_us,
    SharedBound* shared) {
  // The stream's own bounds end it: no single Envoy holds so much.
  if (stream.subscriptions.size() >= options_.max_buckets_per_stream) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "RLQS stream reports more than ", options_.max_buckets_per_stream,
        " buckets (--rlqs_max_buckets_per_stream)"));
  }
  auto found = buckets_.find(BucketName{stream.domain, key});
  const bool new_bucket = found == buckets_.end();
  const size_t bucket_bytes =
      new_bucket ? BucketBytes(stream.domain, key) : found->second->bytes;
  // The stream and its peer pay for the id they hold; the process pays for it once.
  const size_t charged = SubscriptionBytes() + bucket_bytes;
  const size_t added = SubscriptionBytes() + (new_bucket ? bucket_bytes : 0);
  if (stream.bytes + charged > options_.max_stream_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "RLQS stream holds its most state (", Mib(options_.max_stream_bytes),
        ", --rlqs_max_stream_mib): it reports too many or too large buckets"));
  }
  // Bounds shared with other streams (Envoys behind one address, every client) refuse the bucket
  // alone: ending the stream would end an Envoy for what others hold. The bucket is left
  // unanswered (Envoy applies its no_assignment_behavior) and subscribed at a later report once
  // there is room.
  *shared = SharedBound::kNone;
  if (subscriptions_ >= options_.max_subscriptions) {
    *shared = SharedBound::kSubscriptions;
  } else if (stream.peer->bytes + charged > options_.max_peer_bytes) {
    *shared = SharedBound::kPeerBytes;
  } else if (bytes_ + added > options_.max_bytes) {
    *shared = SharedBound::kBytes;
  }
  if (*shared != SharedBound::kNone) {
    return std::pair<Bucket*, Subscription*>(nullptr, nullptr);
  }
  Bucket* bucket;
  if (new_bucket) {
    auto owned = std::make_unique<Bucket>();
    owned->domain = stream.domain;
    owned->key = std::move(key);
    owned->created_us = now_us;
    owned->bytes = bucket_bytes;
    owned->rule = MatchQuotaRule(config, owned->domain, owned->key);
    owned->matched_generation = generation_;
    bucket = owned.get();
    buckets_.emplace(BucketName{bucket->domain, bucket->key}, std::move(owned));
  } else {
    bucket = found->second.get();
  }
  if (remote_ != nullptr) {
    // A new bucket, or a new subscriber of one: the other replicas are to learn of its demand
    // before their next rebalance (ExchangeFresh).
    bucket->fresh_since_us = now_us;
    bucket->fresh_exchanges = 0;
    fresh_.insert(bucket);
    fresh_added_ = true;
  }
  Subscription* sub = &stream.subscriptions[bucket];
  bucket->subscribers.emplace_back(id, sub);
  ++subscriptions_;
  stream.bytes += charged;
  stream.peer->bytes += charged;
  bytes_ += added;
  return std::make_pair(bucket, sub);
}

void QuotaServer::Unsubscribe(StreamId id, Stream& stream, Bucket* bucket) {
  auto& subscribers = bucket->subscribers;
  subscribers.erase(std::remove_if(subscribers.begin(), subscribers.end(),
                                   [id](const auto& s) { return s.first == id; }),
                    subscribers.end());
  stream.subscriptions.erase(bucket);
  const size_t charged = SubscriptionBytes() + bucket->bytes;
  stream.bytes -= charged;
  stream.peer->bytes -= charged;
  --subscriptions_;
  size_t freed = SubscriptionBytes();
  if (subscribers.empty()) {
    freed += bucket->bytes;
    fresh_.erase(bucket);
    buckets_.erase(BucketName{bucket->domain, bucket->key});
  }
  bytes_ -= freed;
}

void QuotaServer::Abandon(StreamId id, Stream& stream, Bucket* bucket, Outbox& out) {
  AddAction(id, *bucket, out)->mutable_abandon_action();
  ++usage_.abandons;
  Unsubscribe(id, stream, bucket);
}

absl::Status QuotaServer::ReportLocked(StreamId id, const Reports& reports, int64_t now_us,
                                       Outbox& out) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    return absl::FailedPreconditionError("RLQS stream already closed");
  }
  Stream& stream = *it->second;
  ++usage_.reports;
  if (reports.domain().size() > options_.max_key_bytes) {
    return Invalid(absl::StrCat("domain is ", reports.domain().size(), " bytes (at most ",
                                options_.max_key_bytes, ")"));
  }
  if (stream.domain.empty()) {
    if (reports.domain().empty()) {
      return Invalid("domain must not be empty in a stream's first report");
    }
    stream.domain = reports.domain();
  } else if (!reports.domain().empty() && reports.domain() != stream.domain) {
    return Invalid(absl::StrCat("domain '", reports.domain(),
                                "' differs from the stream's first report ('", stream.domain,
                                "'): a stream reports one domain"));
  }
  const std::shared_ptr<const Config> config = CurrentConfig();
  for (int i = 0; i < reports.bucket_quota_usages_size(); ++i) {
    const auto& usage = reports.bucket_quota_usages(i);
    const auto where = [i] { return absl::StrCat("bucket_quota_usages[", i, "]"); };
    if (usage.bucket_id().bucket().empty()) {
      return Invalid(absl::StrCat(where(), ".bucket_id must have at least one pair"));
    }
    if (static_cast<size_t>(usage.bucket_id().bucket().size()) > options_.max_pairs) {
      return Invalid(absl::StrCat(where(), ".bucket_id has ", usage.bucket_id().bucket().size(),
                                  " pairs (at most ", options_.max_pairs, ")"));
    }
    for (const auto& [k, v] : usage.bucket_id().bucket()) {
      if (k.empty() || v.empty()) {
        return Invalid(absl::StrCat(where(), ".bucket_id: a key and its value must not be empty"));
      }
      if (k.size() > options_.max_key_bytes || v.size() > options_.max_key_bytes) {
        return Invalid(absl::StrCat(where(), ".bucket_id: a key or value is longer than ",
                                    options_.max_key_bytes, " bytes"));
      }
    }
    const auto& elapsed = usage.time_elapsed();
    if (elapsed.seconds() < 0 || elapsed.nanos() < 0) {
      return Invalid(absl::StrCat(where(), ".time_elapsed must not be negative"));
    }
    // Held to the range before any arithmetic: no overflow whatever the client sends.
    const int64_t max_s = options_.max_time_elapsed_us / 1'000'000;
    const int64_t elapsed_us =
        elapsed.seconds() >= max_s
            ? options_.max_time_elapsed_us
            : std::min(options_.max_time_elapsed_us,
                       elapsed.seconds() * 1'000'000 +
                           std::min(elapsed.nanos(), 999'999'999) / 1000);
    const uint64_t requests = SaturatingAdd(usage.num_requests_allowed(),
                                            usage.num_requests_denied());
    std::string key = BucketKey(usage.bucket_id());
    auto found = buckets_.find(BucketName{stream.domain, key});
    Bucket* bucket = found != buckets_.end() ? found->second.get() : nullptr;
    auto sub_it = bucket != nullptr ? stream.subscriptions.find(bucket)
                                    : stream.subscriptions.end();
    if (sub_it == stream.subscriptions.end()) {
      SharedBound shared = SharedBound::kNone;
      ASSIGN_OR_RETURN(const auto subscribed,
                       Subscribe(id, stream, config.get(), std::move(key), now_us, &shared));
      if (shared != SharedBound::kNone) {
        ++usage_.buckets_refused[static_cast<size_t>(shared) - 1];
        if (now_us - refusal_logged_us_ >= kRefusalLogEveryUs) {
          refusal_logged_us_ = now_us;
          SLUICE_LOG(WARNING) << "RLQS: a new bucket of a stream from " << stream.peer_name
                              << " left unanswered: " << SharedBoundText(shared)
                              << " (sluice_rlqs_buckets_refused_total counts them; logged at "
                                 "most every 10 s)";
        }
        continue;
      }
      bucket = subscribed.first;
      Subscription& sub = *subscribed.second;
      sub.AddReport(requests, elapsed_us, now_us);
      Rematch(config.get(), *bucket);
      // A new subscriber is answered at once (Envoy applies its no_assignment_behavior until
      // then: createBucketImpl's default_action, in envoyproxy/envoy's rate_limit_quota/
      // global_client_impl.cc), with its fair share. When the shares the others here hold
      // leave less room than that (less the hysteresis), those above their fresh share are
      // lowered at once, so that the newcomer is not denied until the next rebalance and the
      // total stays the limit; with newcomer_waits it gets only the room left instead
      // (DENY_ALL when there is none), and the others move at the next rebalance.
      const QuotaRule rule = Effective(config.get(), *bucket, now_us);
      const std::vector<double> shares = Shares(*bucket, rule.rate);
      double room = 0;
      for (size_t i = 0; i < shares.size(); ++i) {
        room += shares[i];
        const Subscription::Sent& held = bucket->subscribers[i].second->sent;
        if (i + 1 < shares.size() && held.assigned && held.kind == QuotaRule::Kind::kShare) {
          room -= held.share;
        }
      }
      const double fair = shares.back();
      if (rule.kind == QuotaRule::Kind::kShare && !options_.newcomer_waits &&
          room < fair * (1 - options_.hysteresis)) {
        for (size_t i = 0; i + 1 < shares.size(); ++i) {
          const auto [other_id, other] = bucket->subscribers[i];
          if (other->sent.assigned && other->sent.kind == rule.kind &&
              other->sent.share > shares[i]) {
            Assign(other_id, *other, *bucket, rule, shares[i], now_us, out);
          }
        }
        room = fair;
      }
      Assign(id, sub, *bucket, rule, std::clamp(room, 0.0, fair), now_us, out);
      continue;
    }
    Subscription& sub = sub_it->second;
    sub.AddReport(requests, elapsed_us, now_us);
    if (sub.idle_reports() >= options_.abandon_idle_reports) {
      // Envoy keeps reporting a bucket it holds until told to let it go.
      Abandon(id, stream, bucket, out);
    } else if (sub.sent.assigned && now_us - sub.sent.at_us >= sub.sent.ttl_us / 2) {
      // Half its life gone: renewed with the share it has (the rebalance may move it).
      Assign(id, sub, *bucket, Effective(config.get(), *bucket, now_us), sub.sent.share, now_us,
             out);
    }
  }
  return absl::OkStatus();
}

void QuotaServer::Close(StreamId id) {
  MutexLock lock(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    return;
  }
  Stream& stream = *it->second;
  while (!stream.subscriptions.empty()) {
    Unsubscribe(id, stream, stream.subscriptions.begin()->first);
  }
  if (--stream.peer->streams == 0) {
    peers_.erase(stream.peer_name);
  }
  streams_.erase(it);
}

QuotaRule QuotaServer::Effective(const Config* config, const Bucket& bucket,
                                 int64_t now_us) const {
  if (remote_ == nullptr || bucket.rule.kind != QuotaRule::Kind::kShare ||
      now_us - std::max(bucket.remote_at_us, bucket.created_us) <=
          options_.remote_stale_after_us) {
    return bucket.rule;
  }
  const Domain* configured = config != nullptr ? config->FindDomain(bucket.domain) : nullptr;
  const FailureMode mode = configured != nullptr && configured->failure_mode.has_value()
                               ? *configured->failure_mode
                               : options_.failure_mode;
  switch (mode) {
    case FailureMode::kAllow:
    case FailureMode::kDeny: {
      QuotaRule blanket;
      blanket.kind =
          mode == FailureMode::kAllow ? QuotaRule::Kind::kAllowAll : QuotaRule::Kind::kDenyAll;
      blanket.rate = bucket.rule.rate;
      return blanket;
    }
    case FailureMode::kLocal:
      break;  // the other replicas' demands as last known
  }
  return bucket.rule;
}

void QuotaServer::AbandonQuiet(int64_t now_us, Outbox& out) {
  const int64_t min_quiet_us = MinTtlSeconds() * 1'000'000;
  for (auto& [id, stream] : streams_) {
    std::vector<Bucket*> quiet;
    for (const auto& [bucket, sub] : stream->subscriptions) {
      // The interval is the server's measure, held to a minute: a client cannot put this off.
      // A bucket whose latest report counted requests is in use, and is not abandoned for its
      // reports' timing (Envoy erases an abandoned bucket, and its traffic falls to
      // no_assignment_behavior, allow-all by default): only once silent for as many of the
      // longest intervals, which no Envoy reaches (it reports every bucket at every tick) and
      // which bounds how long a client that drops a bucket unannounced holds its demand.
      const int64_t interval_us = sub.busy() ? Subscription::kMaxIntervalUs : sub.interval_us();
      if (now_us - sub.last_report_us() >=
          std::max(min_quiet_us, interval_us * options_.abandon_after_intervals)) {
        quiet.push_back(bucket);
      }
    }
    for (Bucket* bucket : quiet) {
      Abandon(id, *stream, bucket, out);
    }
  }
}

std::vector<RemoteDemand::Bucket> QuotaServer::ToExchange() const {
  // Buckets with a rate only (no one needs the demand of an ALLOW_ALL bucket), by domain, the
  // most demanded first, at most exchange_max_buckets_per_domain of a domain.
  struct Entry {
    const Bucket* bucket;
    double demand;
  };
  absl::flat_hash_map<absl::string_view, std::vector<Entry>> by_domain;
  for (const auto& [unused_name, bucket] : buckets_) {
    if (!bucket->rule.Divided()) {
      continue;
    }
    double demand = 0;
    for (const auto& [unused_id, sub] : bucket->subscribers) {
      demand += sub->Demand();
    }
    by_domain[bucket->domain].push_back({bucket.get(), demand});
  }
  std::vector<RemoteDemand::Bucket> out;
  for (auto& [unused_domain, entries] : by_domain) {
    const size_t kept = std::min(entries.size(), options_.exchange_max_buckets_per_domain);
    std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(kept),
                      entries.end(),
                      [](const Entry& a, const Entry& b) { return a.demand > b.demand; });
    for (size_t i = 0; i < kept; ++i) {
      out.push_back(Publish(*entries[i].bucket));
    }
  }
  return out;
}

void QuotaServer::Tick(int64_t now_us) {
  Outbox out;
  std::vector<RemoteDemand::Bucket> published;
  {
    MutexLock lock(mu_);
    // Buckets not reported for too long are abandoned first: their demand leaves the pool.
    AbandonQuiet(now_us, out);
    if (remote_ != nullptr) {
      published = ToExchange();
    }
  }
  // The exchange may wait on the backend: without the lock, so reports go on meanwhile.
  std::vector<std::optional<std::vector<double>>> exchanged;
  if (!published.empty()) {
    exchanged = remote_->Exchange(published);
  }
  bool trim = false;
  {
    MutexLock lock(mu_);
    ApplyExchange(published, exchanged, now_us);
    Rebalance(now_us, out);
    trim = now_us - trimmed_us_ >= kTrimEveryUs;
    if (trim) {
      trimmed_us_ = now_us;
    }
  }
  Deliver(std::move(out));
  if (trim) {
    // What served the streams (reports parsed, state of clients gone, responses written) is
    // freed on many threads' arenas: give it back once there is much of it.
    TrimHeapIfFree(kTrimWhenFreeBytes);
  }
}

double QuotaServer::RebalanceBucket(const Config* config, Bucket& bucket, int64_t now_us,
                                    Outbox& out, QuotaView* view) {
  Rematch(config, bucket);
  const bool rule_changed = bucket.rule_changed;
  bucket.rule_changed = false;
  const QuotaRule rule = Effective(config, bucket, now_us);
  const std::vector<double> shares = Shares(bucket, rule.rate);
  // Shares that each moved by less than the hysteresis can still add up to more (or less)
  // than the limit: past kOverTolerance of what they should sum to, every share that went
  // down (up) is sent.
  double sent_total = 0;
  double fresh_total = 0;
  double demand_total = 0;
  for (size_t i = 0; i < bucket.subscribers.size(); ++i) {
    sent_total += bucket.subscribers[i].second->sent.share;
    fresh_total += shares[i];
  }
  const bool over = sent_total > fresh_total * (1 + kOverTolerance);
  const bool under = sent_total < fresh_total * (1 - kOverTolerance);
  QuotaView::RuleGauges* gauges = view == nullptr || bucket.rule.stat_key.empty()
                                      ? nullptr
                                      : &view->per_rule[bucket.rule.stat_key];
  for (size_t i = 0; i < bucket.subscribers.size(); ++i) {
    const auto [id, sub] = bucket.subscribers[i];
    const Subscription::Sent& sent = sub->sent;
    const bool kind_changed = sent.kind != rule.kind;
    const bool moved = rule.kind == QuotaRule::Kind::kShare &&
                       (ShareMoved(sent.share, shares[i], options_.hysteresis) ||
                        (over && shares[i] < sent.share) || (under && shares[i] > sent.share));
    const bool expiring = now_us - sent.at_us >= sent.ttl_us / 2;
    // Its burst is due, or no longer (HoldsBurst).
    const bool burst_changed = rule.kind == QuotaRule::Kind::kShare && sent.assigned &&
                               sent.kind == rule.kind && sent.share > 0 &&
                               HoldsBurst(*sub, sent.share) != sent.full_burst;
    if (!sent.assigned || rule_changed || kind_changed || moved || expiring || burst_changed) {
      const bool fresh_share = !sent.assigned || rule_changed || kind_changed || moved;
      Assign(id, *sub, bucket, rule, fresh_share ? shares[i] : sent.share, now_us, out);
    }
    const double demand = sub->Demand();
    demand_total += demand;
    if (gauges != nullptr) {
      // A shadow-mode rule is answered ALLOW_ALL: its shares are what enforcing it would give.
      const double share = bucket.rule.shadow                             ? shares[i]
                           : sub->sent.kind == QuotaRule::Kind::kShare ? sub->sent.share
                                                                       : 0.0;
      gauges->demand += demand;
      gauges->share += share;
      if (bucket.rule.shadow || sub->sent.kind != QuotaRule::Kind::kAllowAll) {
        gauges->over += std::max(0.0, demand - share);
      }
    }
  }
  if (view != nullptr && rule.kind != bucket.rule.kind) {
    ++view->stale;
  }
  for (double d : bucket.remote) {
    demand_total += std::isfinite(d) ? d : 0.0;  // not measured yet
  }
  return demand_total;
}

void QuotaServer::Rebalance(int64_t now_us, Outbox& out) {
  const std::shared_ptr<const Config> config = CurrentConfig();
  auto view = std::make_shared<QuotaView>();
  struct Ranked {
    double demand;
    const Bucket* bucket;
  };
  std::vector<Ranked> ranked;
  ranked.reserve(buckets_.size());
  for (auto& [unused_name, owned] : buckets_) {
    Bucket& bucket = *owned;
    ranked.push_back({RebalanceBucket(config.get(), bucket, now_us, out, view.get()), &bucket});
  }
  // The page's lines: the most demanded buckets, copied so that the page needs no lock.
  const size_t shown = std::min(options_.page_buckets, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(shown),
                    ranked.end(),
                    [](const Ranked& a, const Ranked& b) { return a.demand > b.demand; });
  for (size_t i = 0; i < shown; ++i) {
    const Bucket& bucket = *ranked[i].bucket;
    QuotaView::Line& line = view->lines.emplace_back();
    line.domain = bucket.domain;
    line.bucket = bucket.key;
    line.kind = bucket.rule.kind;
    line.shadow = bucket.rule.shadow;
    line.rate = bucket.rule.rate;
    line.stale = Effective(config.get(), bucket, now_us).kind != bucket.rule.kind;
    line.demand = ranked[i].demand;
    for (const auto& [unused_id, sub] : bucket.subscribers) {
      line.demands.push_back(sub->Demand());
      line.sent.push_back(sub->sent.share);
    }
    line.remote = bucket.remote;
  }
  view->not_shown = ranked.size() - shown;
  view->streams = streams_.size();
  view->buckets = buckets_.size();
  view->subscriptions = subscriptions_;
  view->bytes = bytes_;
  view_.Store(std::move(view));
}

void QuotaServer::Deliver(Outbox out) {
  MutexLock lock(deliver_mu_);
  for (auto& [id, entry] : out) {
    auto& [sink, response] = entry;
    if (response.bucket_action_size() > 0) {
      (*sink)(std::move(response));
    }
  }
}

QuotaServer::Usage QuotaServer::TotalUsage() const {
  MutexLock lock(mu_);
  Usage usage = usage_;
  usage.streams = streams_.size();
  usage.peers = peers_.size();
  usage.buckets = buckets_.size();
  usage.subscriptions = subscriptions_;
  usage.bytes = bytes_;
  return usage;
}

std::string QuotaServer::Describe() const {
  return DescribeQuotaView(*view_.Load(), options_.page_values);
}

void QuotaServer::AppendMetrics(std::string* out) const {
  const Usage usage = TotalUsage();
  AppendRuleGauges(*view_.Load(), out);
  const struct {
    absl::string_view name;
    absl::string_view help;
    absl::string_view type;
    uint64_t value;
  } plain[] = {
      {"sluice_rlqs_streams", "Open RLQS streams (one per Envoy)", "gauge",
       static_cast<uint64_t>(usage.streams)},
      {"sluice_rlqs_peers", "Peer addresses with an open RLQS stream", "gauge",
       static_cast<uint64_t>(usage.peers)},
      {"sluice_rlqs_buckets", "Distinct RLQS buckets with a subscriber", "gauge",
       static_cast<uint64_t>(usage.buckets)},
      {"sluice_rlqs_subscriptions", "(stream, bucket) pairs held", "gauge",
       static_cast<uint64_t>(usage.subscriptions)},
      {"sluice_rlqs_state_bytes",
       "Bytes of RLQS state held (streams' buckets and subscriptions), as budgeted against "
       "--rlqs_max_mib",
       "gauge", static_cast<uint64_t>(usage.bytes)},
      {"sluice_rlqs_reports_total", "RLQS usage report messages received", "counter",
       static_cast<uint64_t>(usage.reports)},
      {"sluice_rlqs_abandons_total",
       "Buckets abandoned: idle (reported with no request) or no longer reported", "counter",
       static_cast<uint64_t>(usage.abandons)},
      {"sluice_rlqs_exchange_failures_total",
       "Bucket demand exchanges with the other replicas that failed (past "
       "--rlqs_rebalance_interval x 2.5 without one, the bucket's failure mode answers)",
       "counter", static_cast<uint64_t>(usage.exchange_failures)},
      {"sluice_rlqs_refused_total", "RLQS streams refused or ended for a bad report or a bound",
       "counter", static_cast<uint64_t>(usage.refused)},
  };
  for (const auto& metric : plain) {
    absl::StrAppend(out, "# HELP ", metric.name, " ", metric.help, "\n# TYPE ", metric.name, " ",
                    metric.type, "\n", metric.name, " ", metric.value, "\n");
  }
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_buckets_refused_total New buckets left unanswered because a "
                  "bound shared with other streams was reached (the stream goes on), by bound\n"
                  "# TYPE sluice_rlqs_buckets_refused_total counter\n");
  const char* kBounds[] = {"subscriptions", "peer_bytes", "bytes"};
  for (size_t b = 0; b < 3; ++b) {
    absl::StrAppend(out, "sluice_rlqs_buckets_refused_total{bound=\"", kBounds[b], "\"} ",
                    usage.buckets_refused[b], "\n");
  }
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_assignments_total Bucket assignments sent, by strategy\n"
                  "# TYPE sluice_rlqs_assignments_total counter\n");
  const char* kStrategies[] = {"allow_all", "deny_all", "token_bucket"};
  for (size_t s = 0; s < 3; ++s) {
    absl::StrAppend(out, "sluice_rlqs_assignments_total{strategy=\"", kStrategies[s], "\"} ",
                    usage.assignments[s], "\n");
  }
}

}  // namespace sluice::quota
