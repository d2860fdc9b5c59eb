#include "server/quota/quota_server.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/common/prometheus_label.h"
#include "server/quota/bucket_match.h"
#include "server/quota/fair_share.h"

namespace sluice::quota {
namespace {

using BucketId = envoy::service::rate_limit_quota::v3::BucketId;
using BucketAction = QuotaResponse::BucketAction;

// How far from what they should sum to the shares a bucket's subscribers hold may drift before
// the ones that moved the other way are sent, whatever the hysteresis.
constexpr double kOverTolerance = 0.02;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("RateLimitQuotaUsageReports: ", what));
}

int64_t DurationMicros(const google::protobuf::Duration& d) {
  return d.seconds() * 1'000'000 + d.nanos() / 1000;
}

void SetDuration(int64_t us, google::protobuf::Duration* out) {
  out->set_seconds(us / 1'000'000);
  out->set_nanos(static_cast<int32_t>(us % 1'000'000) * 1000);
}

}  // namespace

std::string BucketKey(const BucketId& bucket) {
  std::vector<std::pair<absl::string_view, absl::string_view>> pairs(bucket.bucket().begin(),
                                                                     bucket.bucket().end());
  std::sort(pairs.begin(), pairs.end());
  std::string key;
  for (const auto& [k, v] : pairs) {
    absl::StrAppend(&key, k.size(), ":", k, v.size(), ":", v);
  }
  return key;
}

double QuotaServer::Subscription::Demand() const {
  uint64_t requests = 0;
  int64_t elapsed_us = 0;
  for (size_t i = 0; i < report_count; ++i) {
    requests += reports[i].first;
    elapsed_us += reports[i].second;
  }
  return elapsed_us > 0 ? static_cast<double>(requests) * 1e6 / static_cast<double>(elapsed_us)
                        : 0.0;
}

void QuotaServer::Subscription::AddReport(uint64_t requests, int64_t elapsed_us) {
  if (report_count == reports.size()) {
    std::rotate(reports.begin(), reports.begin() + 1, reports.end());
    --report_count;
  }
  reports[report_count++] = {requests, elapsed_us};
}

const envoy::service::rate_limit_quota::v3::BucketId& QuotaServer::IdOf(
    const std::string& domain, const std::string& key) const {
  return buckets_.at(BucketsKey(domain, key)).id;
}

QuotaServer::QuotaServer(const ConfigStore& config, QuotaOptions options, RemoteDemand* remote)
    : config_(config), options_(options), remote_(remote) {}

absl::StatusOr<QuotaServer::StreamId> QuotaServer::Open(Sink sink) {
  MutexLock lock(mu_);
  if (streams_.size() >= options_.max_streams) {
    ++usage_.refused;
    return absl::ResourceExhaustedError(
        absl::StrCat("this server holds its most RLQS streams (", options_.max_streams,
                     ", --rlqs_max_streams)"));
  }
  const StreamId id = next_id_++;
  auto stream = std::make_unique<Stream>();
  stream->sink = std::make_shared<Sink>(std::move(sink));
  streams_.emplace(id, std::move(stream));
  return id;
}

QuotaServer::Rule QuotaServer::MatchRule(const Config* config, const std::string& domain,
                                         const BucketId& id) {
  Rule rule;  // no config, domain or rule: allow all
  const Domain* configured = config != nullptr ? config->FindDomain(domain) : nullptr;
  if (configured == nullptr) {
    return rule;
  }
  const std::vector<std::pair<std::string, std::string>> pairs(id.bucket().begin(),
                                                               id.bucket().end());
  const BucketMatch match = MatchBucket(*configured, pairs);
  if (match.node == nullptr) {
    return rule;
  }
  rule.stat_key = match.node->full_key;
  bool limited = false;
  for (const RateLimitRule& r : match.node->rules) {
    if (r.unlimited) {
      continue;
    }
    const double rate = static_cast<double>(r.params.limit) * 1e6 /
                        static_cast<double>(r.params.period_us);
    if (!limited || rate < rule.rate) {
      rule.rate = rate;
      rule.burst = static_cast<double>(Capacity(r.params));
    }
    limited = true;
  }
  if (limited) {
    rule.kind = rule.rate > 0 ? Kind::kShare : Kind::kDenyAll;
  }
  if (match.node->shadow_mode) {
    // Answered ALLOW_ALL; the rate stays, so that the per-rule gauges show the shares and the
    // demand above them as if the rule were enforced.
    rule.shadow = true;
    rule.kind = Kind::kAllowAll;
  }
  return rule;
}

std::vector<double> QuotaServer::Shares(const Bucket& bucket) const {
  std::vector<double> demands;
  demands.reserve(bucket.subscribers.size() + bucket.remote.size());
  for (StreamId id : bucket.subscribers) {
    demands.push_back(streams_.at(id)->buckets.at(bucket.key).Demand());
  }
  const size_t local = demands.size();
  demands.insert(demands.end(), bucket.remote.begin(), bucket.remote.end());
  std::vector<double> shares = MaxMinShares(bucket.rule.rate, demands);
  shares.resize(local);
  return shares;
}

void QuotaServer::Assign(StreamId stream, Subscription& sub, const BucketId& id,
                         const Rule& rule, double share, int64_t now_us, Outbox& out) {
  auto& [sink, response] = out[stream];
  if (sink == nullptr) {
    sink = streams_.at(stream)->sink;
  }
  BucketAction* action = response.add_bucket_action();
  *action->mutable_bucket_id() = id;
  auto* assignment = action->mutable_quota_assignment_action();
  const int64_t ttl_us =
      std::max(absl::ToInt64Microseconds(options_.min_ttl),
               sub.interval_us * options_.assignment_ttl_intervals);
  SetDuration(ttl_us, assignment->mutable_assignment_time_to_live());
  auto* strategy = assignment->mutable_rate_limit_strategy();
  switch (rule.kind) {
    case Kind::kAllowAll:
      strategy->set_blanket_rule(envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
      break;
    case Kind::kDenyAll:
      strategy->set_blanket_rule(envoy::type::v3::RateLimitStrategy::DENY_ALL);
      break;
    case Kind::kShare: {
      // A share of 0 (nothing left) denies; the rest is a bucket of the share's rate with the
      // same part of the rule's burst.
      if (share <= 0) {
        strategy->set_blanket_rule(envoy::type::v3::RateLimitStrategy::DENY_ALL);
        break;
      }
      const LocalBucket local = BucketForRate(share, rule.burst * share / rule.rate);
      auto* bucket = strategy->mutable_token_bucket();
      bucket->set_max_tokens(local.max_tokens);
      bucket->mutable_tokens_per_fill()->set_value(local.tokens_per_fill);
      bucket->mutable_fill_interval()->set_seconds(local.fill_interval_s);
      break;
    }
  }
  ++usage_.assignments[static_cast<size_t>(rule.kind)];
  sub.assigned = true;
  sub.sent_kind = rule.kind;
  sub.sent_share = share;
  sub.sent_us = now_us;
  sub.ttl_us = ttl_us;
}

absl::Status QuotaServer::Report(StreamId id, const Reports& reports, int64_t now_us) {
  Outbox out;
  absl::Status status;
  {
    MutexLock lock(mu_);
    status = ReportLocked(id, reports, now_us, out);
    if (!status.ok()) {
      ++usage_.refused;
    }
  }
  Deliver(std::move(out));
  return status;
}

absl::Status QuotaServer::ReportLocked(StreamId id, const Reports& reports, int64_t now_us,
                                     Outbox& out) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    return absl::FailedPreconditionError("RLQS stream already closed");
  }
  Stream& stream = *it->second;
  ++usage_.reports;
  if (reports.domain().empty()) {
    return Invalid("domain must not be empty");
  }
  if (reports.domain().size() > options_.max_key_bytes) {
    return Invalid(absl::StrCat("domain is ", reports.domain().size(), " bytes (at most ",
                                options_.max_key_bytes, ")"));
  }
  if (stream.domain.empty()) {
    stream.domain = reports.domain();
  } else if (reports.domain() != stream.domain) {
    return Invalid(absl::StrCat("domain '", reports.domain(),
                                "' differs from the stream's first report ('", stream.domain,
                                "'): a stream reports one domain"));
  }
  if (reports.bucket_quota_usages().empty()) {
    return Invalid("bucket_quota_usages must not be empty");
  }
  const std::shared_ptr<const Config> config = config_.Get();
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
    const int64_t elapsed_us = DurationMicros(usage.time_elapsed());
    if (!usage.has_time_elapsed() || elapsed_us <= 0) {
      return Invalid(absl::StrCat(where(), ".time_elapsed must be more than 0"));
    }
    const std::string key = BucketKey(usage.bucket_id());
    auto [sub_it, fresh] = stream.buckets.try_emplace(key);
    if (fresh && stream.buckets.size() > options_.max_buckets_per_stream) {
      stream.buckets.erase(sub_it);
      return absl::ResourceExhaustedError(absl::StrCat(
          "RLQS stream reports more than ", options_.max_buckets_per_stream,
          " buckets (--rlqs_max_buckets_per_stream)"));
    }
    if (fresh && subscriptions_ >= options_.max_subscriptions) {
      stream.buckets.erase(sub_it);
      return absl::ResourceExhaustedError(absl::StrCat(
          "this server holds its most RLQS stream buckets (", options_.max_subscriptions,
          ", --rlqs_max_subscriptions)"));
    }
    subscriptions_ += fresh ? 1 : 0;
    Subscription& sub = sub_it->second;
    // The first report of a bucket is Envoy's immediate one, sent at its first request: no
    // measure of its rate, so the next report replaces it.
    if (sub.report_count == 1 && !sub.measured) {
      sub.report_count = 0;
    }
    sub.measured = !fresh;
    sub.AddReport(usage.num_requests_allowed() + usage.num_requests_denied(), elapsed_us);
    sub.interval_us = elapsed_us;
    sub.last_report_us = now_us;
    Bucket& bucket = buckets_[BucketsKey(stream.domain, key)];
    if (fresh) {
      if (bucket.subscribers.empty()) {
        bucket.domain = stream.domain;
        bucket.key = key;
        bucket.id = usage.bucket_id();
      }
      bucket.subscribers.push_back(id);
      if (bucket.matched_with != config.get() || bucket.subscribers.size() == 1) {
        bucket.rule = MatchRule(config.get(), stream.domain, bucket.id);
        bucket.matched_with = config.get();
      }
      // A new subscriber is answered at once (Envoy allows everything until then); the
      // others move at the next rebalance.
      const std::vector<double> shares = Shares(bucket);
      Assign(id, sub, bucket.id, Effective(config.get(), stream.domain, bucket), shares.back(),
             now_us, out);
    } else if (sub.assigned && now_us - sub.sent_us >= sub.ttl_us / 2) {
      // Half its life gone: renewed with the share it has (the rebalance may move it).
      Assign(id, sub, bucket.id, Effective(config.get(), stream.domain, bucket), sub.sent_share,
             now_us, out);
    }
  }
  return absl::OkStatus();
}

void QuotaServer::Unsubscribe(StreamId stream, const std::string& domain, const std::string& key) {
  auto it = buckets_.find(BucketsKey(domain, key));
  if (it == buckets_.end()) {
    return;
  }
  auto& subscribers = it->second.subscribers;
  subscribers.erase(std::remove(subscribers.begin(), subscribers.end(), stream),
                    subscribers.end());
  --subscriptions_;
  if (subscribers.empty()) {
    buckets_.erase(it);
  }
}

void QuotaServer::Close(StreamId id) {
  MutexLock lock(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    return;
  }
  for (const auto& [key, sub] : it->second->buckets) {
    Unsubscribe(id, it->second->domain, key);
  }
  streams_.erase(it);
}

QuotaServer::Rule QuotaServer::Effective(const Config* config, const std::string& domain,
                                         const Bucket& bucket) const {
  if (!exchange_failed_ || bucket.rule.kind != Kind::kShare) {
    return bucket.rule;
  }
  const Domain* configured = config != nullptr ? config->FindDomain(domain) : nullptr;
  const FailureMode mode = configured != nullptr && configured->failure_mode.has_value()
                               ? *configured->failure_mode
                               : options_.failure_mode;
  switch (mode) {
    case FailureMode::kAllow:
    case FailureMode::kDeny: {
      Rule blanket;
      blanket.kind = mode == FailureMode::kAllow ? Kind::kAllowAll : Kind::kDenyAll;
      return blanket;
    }
    case FailureMode::kLocal:
      break;  // the other replicas' demands as last known
  }
  return bucket.rule;
}

void QuotaServer::AbandonQuiet(int64_t now_us, Outbox& out) {
  for (auto& [id, stream] : streams_) {
    for (auto it = stream->buckets.begin(); it != stream->buckets.end();) {
      Subscription& sub = it->second;
      const int64_t quiet = std::max(absl::ToInt64Microseconds(options_.min_ttl),
                                     sub.interval_us * options_.abandon_after_intervals);
      if (now_us - sub.last_report_us < quiet) {
        ++it;
        continue;
      }
      auto& [sink, response] = out[id];
      if (sink == nullptr) {
        sink = stream->sink;
      }
      BucketAction* action = response.add_bucket_action();
      *action->mutable_bucket_id() = IdOf(stream->domain, it->first);
      action->mutable_abandon_action();
      ++usage_.abandons;
      Unsubscribe(id, stream->domain, it->first);
      stream->buckets.erase(it++);
    }
  }
}

void QuotaServer::Tick(int64_t now_us) {
  Outbox out;
  std::vector<RemoteDemand::Bucket> published;
  {
    MutexLock lock(mu_);
    // Buckets not reported for too long are abandoned first: their demand leaves the pool.
    AbandonQuiet(now_us, out);
    if (remote_ != nullptr) {
      published.reserve(buckets_.size());
      for (const auto& [unused_key, bucket] : buckets_) {
        RemoteDemand::Bucket& entry = published.emplace_back();
        entry.domain = bucket.domain;
        entry.key = bucket.key;
        for (StreamId id : bucket.subscribers) {
          entry.local.push_back(streams_.at(id)->buckets.at(entry.key).Demand());
        }
      }
    }
  }
  // The exchange may wait on the backend: without the lock, so reports go on meanwhile.
  std::optional<absl::StatusOr<std::vector<std::vector<double>>>> exchanged;
  if (!published.empty()) {
    exchanged = remote_->Exchange(published);
  }
  {
    MutexLock lock(mu_);
    if (exchanged.has_value()) {
      exchange_failed_ = !exchanged->ok() || (*exchanged)->size() != published.size();
      if (exchange_failed_) {
        ++usage_.exchange_failures;
      } else {
        for (size_t i = 0; i < published.size(); ++i) {
          auto it = buckets_.find(BucketsKey(published[i].domain, published[i].key));
          if (it != buckets_.end()) {
            it->second.remote = std::move((**exchanged)[i]);
          }
        }
      }
    }
    Rebalance(now_us, out);
  }
  Deliver(std::move(out));
}

void QuotaServer::Rebalance(int64_t now_us, Outbox& out) {
  const std::shared_ptr<const Config> config = config_.Get();
  for (auto& [unused_key, bucket] : buckets_) {
    const std::string& domain = bucket.domain;
    const std::string& key = bucket.key;
    bool rule_changed = false;
    if (bucket.matched_with != config.get()) {
      const Rule rule = MatchRule(config.get(), domain, bucket.id);
      rule_changed = rule.kind != bucket.rule.kind || rule.rate != bucket.rule.rate ||
                     rule.burst != bucket.rule.burst;
      bucket.rule = rule;
      bucket.matched_with = config.get();
    }
    const Rule rule = Effective(config.get(), domain, bucket);
    const std::vector<double> shares = Shares(bucket);
    // Shares that each moved by less than the hysteresis can still add up to more (or less)
    // than the limit: past kOverTolerance of what they should sum to, every share that went
    // down (up) is sent.
    double sent_total = 0;
    double fresh_total = 0;
    for (size_t i = 0; i < bucket.subscribers.size(); ++i) {
      sent_total += streams_.at(bucket.subscribers[i])->buckets.at(key).sent_share;
      fresh_total += shares[i];
    }
    const bool over = sent_total > fresh_total * (1 + kOverTolerance);
    const bool under = sent_total < fresh_total * (1 - kOverTolerance);
    for (size_t i = 0; i < bucket.subscribers.size(); ++i) {
      const StreamId id = bucket.subscribers[i];
      Subscription& sub = streams_.at(id)->buckets.at(key);
      const bool kind_changed = sub.sent_kind != rule.kind;
      const bool moved = rule.kind == Kind::kShare &&
                         (ShareMoved(sub.sent_share, shares[i], options_.hysteresis) ||
                          (over && shares[i] < sub.sent_share) ||
                          (under && shares[i] > sub.sent_share));
      const bool expiring = now_us - sub.sent_us >= sub.ttl_us / 2;
      if (!sub.assigned || rule_changed || kind_changed || moved || expiring) {
        const bool fresh_share = !sub.assigned || rule_changed || kind_changed || moved;
        Assign(id, sub, bucket.id, rule, fresh_share ? shares[i] : sub.sent_share, now_us, out);
      }
    }
  }
}

void QuotaServer::ExpireAll() {
  Outbox out;
  {
    MutexLock lock(mu_);
    for (auto& [id, stream] : streams_) {
      if (stream->buckets.empty()) {
        continue;
      }
      auto& [sink, response] = out[id];
      sink = stream->sink;
      for (auto& [key, sub] : stream->buckets) {
        BucketAction* action = response.add_bucket_action();
        *action->mutable_bucket_id() = IdOf(stream->domain, key);
        // TTL 0 and no strategy: the assignment is expired at once.
        action->mutable_quota_assignment_action()->mutable_assignment_time_to_live();
      }
    }
  }
  Deliver(std::move(out));
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
  usage.buckets = buckets_.size();
  usage.subscriptions = subscriptions_;
  return usage;
}

std::string QuotaServer::Describe(size_t max_buckets) const {
  MutexLock lock(mu_);
  std::string out = absl::StrCat("rlqs: ", streams_.size(), " streams, ", buckets_.size(),
                                 " buckets, ", subscriptions_, " subscriptions",
                                 exchange_failed_ ? "; the last exchange with other replicas "
                                                    "failed (the failure mode answers)"
                                                  : "",
                                 "\n");
  struct Line {
    double demand;
    const Bucket* bucket;
  };
  std::vector<Line> lines;
  lines.reserve(buckets_.size());
  for (const auto& [unused_key, bucket] : buckets_) {
    double demand = 0;
    for (StreamId id : bucket.subscribers) {
      demand += streams_.at(id)->buckets.at(bucket.key).Demand();
    }
    for (double d : bucket.remote) {
      demand += d;
    }
    lines.push_back({demand, &bucket});
  }
  const size_t shown = std::min(max_buckets, lines.size());
  std::partial_sort(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(shown), lines.end(),
                    [](const Line& a, const Line& b) { return a.demand > b.demand; });
  const auto number = [](double x) { return absl::StrFormat("%.1f", x); };
  for (size_t i = 0; i < shown; ++i) {
    const Bucket& bucket = *lines[i].bucket;
    std::vector<std::pair<std::string, std::string>> pairs(bucket.id.bucket().begin(),
                                                           bucket.id.bucket().end());
    std::sort(pairs.begin(), pairs.end());
    absl::StrAppend(&out, bucket.domain);
    for (const auto& [k, v] : pairs) {
      absl::StrAppend(&out, " ", k, "=", v);
    }
    switch (bucket.rule.kind) {
      case Kind::kAllowAll:
        absl::StrAppend(&out, ": allow_all");
        break;
      case Kind::kDenyAll:
        absl::StrAppend(&out, ": deny_all");
        break;
      case Kind::kShare:
        absl::StrAppend(&out, ": ", number(bucket.rule.rate), "/s");
        break;
    }
    std::vector<std::string> demands;
    std::vector<std::string> sent;
    for (StreamId id : bucket.subscribers) {
      const Subscription& sub = streams_.at(id)->buckets.at(bucket.key);
      demands.push_back(number(sub.Demand()));
      sent.push_back(number(sub.sent_share));
    }
    absl::StrAppend(&out, "; here ", bucket.subscribers.size(), " (demand ",
                    absl::StrJoin(demands, ", "), "; sent ", absl::StrJoin(sent, ", "), ")");
    if (!bucket.remote.empty()) {
      std::vector<std::string> remote;
      for (double d : bucket.remote) {
        remote.push_back(number(d));
      }
      absl::StrAppend(&out, "; other replicas ", bucket.remote.size(), " (",
                      absl::StrJoin(remote, ", "), ")");
    }
    absl::StrAppend(&out, "\n");
  }
  if (shown < lines.size()) {
    absl::StrAppend(&out, "... and ", lines.size() - shown, " buckets less demanded\n");
  }
  return out;
}

void QuotaServer::AppendMetrics(std::string* out) const {
  const Usage usage = TotalUsage();
  // Per rule (the config's stat keys, so as many series as rules with buckets): what this
  // replica's Envoys ask of its buckets and the shares last sent them, requests a second.
  struct RuleGauges {
    double demand = 0;
    double share = 0;
    double over = 0;  // demand above the share: what the Envoys would deny
  };
  absl::btree_map<std::string, RuleGauges> per_rule;
  {
    MutexLock lock(mu_);
    for (const auto& [unused_key, bucket] : buckets_) {
      if (bucket.rule.stat_key.empty()) {
        continue;
      }
      RuleGauges& gauges = per_rule[bucket.rule.stat_key];
      // A shadow-mode rule is answered ALLOW_ALL: its shares are what enforcing it would give.
      const std::vector<double> as_if =
          bucket.rule.shadow ? Shares(bucket) : std::vector<double>();
      for (size_t i = 0; i < bucket.subscribers.size(); ++i) {
        const Subscription& sub = streams_.at(bucket.subscribers[i])->buckets.at(bucket.key);
        const double demand = sub.Demand();
        const double share = bucket.rule.shadow ? as_if[i]
                             : sub.sent_kind == Kind::kShare ? sub.sent_share
                                                             : 0.0;
        gauges.demand += demand;
        gauges.share += share;
        if (bucket.rule.shadow || sub.sent_kind != Kind::kAllowAll) {
          gauges.over += std::max(0.0, demand - share);
        }
      }
    }
  }
  const struct {
    absl::string_view name;
    absl::string_view help;
    double RuleGauges::*value;
  } families[] = {
      {"sluice_rlqs_rule_demand",
       "Requests a second this replica's Envoys report for the buckets of a rule, by stat key",
       &RuleGauges::demand},
      {"sluice_rlqs_rule_share",
       "Requests a second assigned to this replica's Envoys for the buckets of a rule (token "
       "buckets; for a shadow-mode rule, what enforcing it would assign), by stat key",
       &RuleGauges::share},
      {"sluice_rlqs_rule_over_share",
       "Requests a second this replica's Envoys ask beyond their shares of a rule's buckets: what "
       "they deny, or for a shadow-mode rule would deny, by stat key",
       &RuleGauges::over},
  };
  for (const auto& family : families) {
    absl::StrAppend(out, "# HELP ", family.name, " ", family.help, "\n# TYPE ", family.name,
                    " gauge\n");
    for (const auto& [key, gauges] : per_rule) {
      absl::StrAppend(out, family.name, "{key=\"");
      AppendLabelValue(key, out);
      absl::StrAppend(out, "\"} ", gauges.*family.value, "\n");
    }
  }
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_streams Open RLQS streams (one per Envoy)\n"
                  "# TYPE sluice_rlqs_streams gauge\nsluice_rlqs_streams ",
                  usage.streams, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_buckets Distinct RLQS buckets with a subscriber\n"
                  "# TYPE sluice_rlqs_buckets gauge\nsluice_rlqs_buckets ",
                  usage.buckets, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_subscriptions (stream, bucket) pairs held\n"
                  "# TYPE sluice_rlqs_subscriptions gauge\nsluice_rlqs_subscriptions ",
                  usage.subscriptions, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_reports_total RLQS usage report messages received\n"
                  "# TYPE sluice_rlqs_reports_total counter\nsluice_rlqs_reports_total ",
                  usage.reports, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_assignments_total Bucket assignments sent, by strategy\n"
                  "# TYPE sluice_rlqs_assignments_total counter\n");
  const char* kStrategies[] = {"allow_all", "deny_all", "token_bucket"};
  for (size_t s = 0; s < 3; ++s) {
    absl::StrAppend(out, "sluice_rlqs_assignments_total{strategy=\"", kStrategies[s], "\"} ",
                    usage.assignments[s], "\n");
  }
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_abandons_total Buckets abandoned for want of reports\n"
                  "# TYPE sluice_rlqs_abandons_total counter\nsluice_rlqs_abandons_total ",
                  usage.abandons, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_exchange_failures_total Rebalances whose exchange of demand "
                  "with the other replicas failed (the failure mode answered)\n"
                  "# TYPE sluice_rlqs_exchange_failures_total counter\n"
                  "sluice_rlqs_exchange_failures_total ",
                  usage.exchange_failures, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_rlqs_refused_total RLQS streams refused or ended for a bad "
                  "report or a bound\n"
                  "# TYPE sluice_rlqs_refused_total counter\nsluice_rlqs_refused_total ",
                  usage.refused, "\n");
}

}  // namespace sluice::quota
