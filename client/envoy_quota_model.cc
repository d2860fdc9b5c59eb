#include "client/envoy_quota_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "google/protobuf/util/message_differencer.h"

// Source paths cited below, all in Envoy:
//   filter.cc, global_client_impl.cc, filter_persistence.cc, quota_bucket_cache.h:
//     source/extensions/filters/http/rate_limit_quota/
//   token_bucket_impl.h/.cc: source/common/common/
namespace sluice {
namespace {

using envoy::type::v3::RateLimitStrategy;

// token_bucket_impl.cc: "The minimal fill rate will be one second every year."
constexpr double kMinFillRate = 1.0 / (365 * 24 * 60 * 60);

const RateLimitStrategy& AllowAll() {
  static const RateLimitStrategy* const allow_all = [] {
    auto* s = new RateLimitStrategy;
    s->set_blanket_rule(RateLimitStrategy::ALLOW_ALL);
    return s;
  }();
  return *allow_all;
}

}  // namespace

std::optional<EnvoyQuotaProfile> ParseEnvoyQuotaProfile(const std::string& name) {
  if (name == "envoy") {
    return EnvoyQuotaProfile::kEnvoy;
  }
  if (name == "api") {
    return EnvoyQuotaProfile::kApiText;
  }
  return std::nullopt;
}

const char* EnvoyQuotaProfileName(EnvoyQuotaProfile profile) {
  return profile == EnvoyQuotaProfile::kEnvoy ? "envoy" : "api";
}

EnvoyQuotaRules EnvoyQuotaRules::For(EnvoyQuotaProfile profile) {
  EnvoyQuotaRules rules;  // the member defaults are kEnvoy's
  if (profile == EnvoyQuotaProfile::kApiText) {
    rules.per_bucket_interval = true;
    rules.whole_second_elapsed = false;
    rules.domain_in_every_message = false;
    rules.compare_ignores_fill_seconds = false;
    rules.whole_second_fill_interval = false;
    rules.unset_tokens_per_fill_is_one = true;
    rules.new_tokens = NewTokens::kFull;
    rules.whole_second_ttl = false;
    rules.unset_ttl_never_expires = true;
    rules.reuse_last_assignment = true;
    rules.default_token_bucket_built = true;
  }
  return rules;
}

// --- EnvoyTokenBucket: AtomicTokenBucketImpl (token_bucket_impl.h/.cc) ---

EnvoyTokenBucket::EnvoyTokenBucket(double max_tokens, double fill_rate, double initial_tokens,
                                   absl::Time now)
    // AtomicTokenBucketImpl's constructor: fill_rate_ = max(|fill_rate|, kMinFillRate); a NaN
    // rate stays NaN there (std::max returns its first argument when they do not compare).
    : max_tokens_(max_tokens),
      fill_rate_(std::isnan(fill_rate) ? fill_rate : std::max(std::abs(fill_rate), kMinFillRate)),
      empty_at_(now) {
  // The constructor moves time_in_seconds_ back by the tokens it starts with / the rate.
  if (std::isfinite(fill_rate_) && initial_tokens > 0) {
    empty_at_ = now - absl::Seconds(initial_tokens / fill_rate_);
  }
}

double EnvoyTokenBucket::Level(absl::Time now) const {
  // consume / remainingTokens: std::min(max_tokens_, (now - time_in_seconds_) * fill_rate_).
  // With an infinite rate the product is infinite, or NaN at zero elapsed time, and std::min
  // returns max_tokens_ for both: such a bucket never runs dry.
  if (!std::isfinite(fill_rate_)) {
    return max_tokens_;
  }
  const double refill = absl::ToDoubleSeconds(now - empty_at_) * fill_rate_;
  return refill < max_tokens_ ? refill : max_tokens_;
}

bool EnvoyTokenBucket::Consume(absl::Time now) {
  // consume(1, /*allow_partial=*/false): the token is taken when a whole one is there, and
  // time_in_seconds_ moves to now - (left / rate).
  const double level = Level(now);
  if (level < 1) {
    return false;
  }
  if (std::isfinite(fill_rate_)) {
    empty_at_ = now - absl::Seconds((level - 1) / fill_rate_);
  }
  return true;
}

double EnvoyTokenBucket::Remaining(absl::Time now) const { return Level(now); }

// --- EnvoyQuotaModel ---

EnvoyQuotaModel::EnvoyQuotaModel(EnvoyQuotaProfile profile, std::string domain,
                                 EnvoyBucketSettings settings)
    : EnvoyQuotaModel(EnvoyQuotaRules::For(profile), std::move(domain), std::move(settings)) {}

EnvoyQuotaModel::EnvoyQuotaModel(EnvoyQuotaRules rules, std::string domain,
                                 EnvoyBucketSettings settings)
    : rules_(rules), domain_(std::move(domain)), settings_(std::move(settings)) {}

std::string EnvoyQuotaModel::Key(const BucketId& bucket) {
  // Envoy keys its cache by a hash of the BucketId message (global_client_impl.cc,
  // onQuotaResponseImpl: MessageUtil::hash(action.bucket_id())); a map's pairs have no order, so
  // the model keys them sorted.
  std::map<std::string, std::string> sorted(bucket.bucket().begin(), bucket.bucket().end());
  std::string key;
  for (const auto& [k, v] : sorted) {
    key.append(k).push_back('\x1f');
    key.append(v).push_back('\x1e');
  }
  return key;
}

EnvoyQuotaModel::BucketId EnvoyQuotaModel::MakeBucketId(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  BucketId id;
  for (const auto& [k, v] : pairs) {
    (*id.mutable_bucket())[k] = v;
  }
  return id;
}

double EnvoyQuotaModel::FillRate(const envoy::type::v3::TokenBucket& bucket,
                                 const EnvoyQuotaRules& rules) {
  // createTokenBucketFromAction: tokens_per_fill().value() (0 when unset) divided by
  // absl::ToInt64Seconds(fill_interval): whole seconds, truncated; an interval under 1 s is
  // 0 s, and the double division gives an infinite rate (NaN with 0 tokens).
  const double tokens = bucket.has_tokens_per_fill()       ? bucket.tokens_per_fill().value()
                        : rules.unset_tokens_per_fill_is_one ? 1.0
                                                             : 0.0;
  const absl::Duration interval = absl::Seconds(bucket.fill_interval().seconds()) +
                                  absl::Nanoseconds(bucket.fill_interval().nanos());
  if (rules.whole_second_fill_interval) {
    return tokens / static_cast<double>(absl::ToInt64Seconds(interval));
  }
  return tokens / absl::ToDoubleSeconds(interval);
}

const EnvoyQuotaModel::Strategy& EnvoyQuotaModel::DefaultStrategy(const Bucket& bucket) const {
  // filter.cc recordBucketUsage: default_action = no_assignment_behavior.fallback_rate_limit,
  // or ALLOW_ALL when no_assignment_behavior is not configured.
  return bucket.settings.no_assignment ? *bucket.settings.no_assignment : AllowAll();
}

EnvoyQuotaModel::Decision EnvoyQuotaModel::OnRequest(const BucketId& bucket, absl::Time now) {
  return OnRequest(bucket, settings_, now);
}

EnvoyQuotaModel::Decision EnvoyQuotaModel::OnRequest(const BucketId& bucket,
                                                     const EnvoyBucketSettings& settings,
                                                     absl::Time now) {
  AdvanceTo(now);
  const std::string key = Key(bucket);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    return Create(bucket, key, settings, now);
  }
  // filter.cc processCachedBucket: decide, then count the request as allowed or denied.
  Decision decision;
  decision.allowed = Decide(it->second, now);
  ++(decision.allowed ? it->second.allowed : it->second.denied);
  return decision;
}

bool EnvoyQuotaModel::Decide(Bucket& bucket, absl::Time now) {
  // filter.cc shouldAllowRequest: the cached action's strategy, or the default action's; an
  // action without quota_assignment_action has no strategy.
  const Strategy* strategy = &DefaultStrategy(bucket);
  static const Strategy* const kNone = new Strategy;
  if (bucket.cached_action) {
    strategy = bucket.cached_action->has_quota_assignment_action()
                   ? &bucket.cached_action->quota_assignment_action().rate_limit_strategy()
                   : kNone;
  }
  switch (strategy->strategy_case()) {
    case Strategy::kBlanketRule:
      return strategy->blanket_rule() != RateLimitStrategy::DENY_ALL;
    case Strategy::kTokenBucket:
      // Try to consume one token. Envoy never builds a limiter for a token bucket given as
      // no_assignment_behavior and dereferences the null one here.
      if (!bucket.limiter) {
        envoy_would_crash_ = true;
        return true;
      }
      return bucket.limiter->Consume(now);
    case Strategy::kRequestsPerTimeUnit:
      return true;  // "not yet supported by RLQS": allowed
    case Strategy::STRATEGY_NOT_SET:
      return true;  // logged as a bug; fails open
  }
  return true;
}

EnvoyQuotaModel::Decision EnvoyQuotaModel::Create(const BucketId& bucket, const std::string& key,
                                                  const EnvoyBucketSettings& settings,
                                                  absl::Time now) {
  Decision decision;
  // filter.cc noAssignmentBehaviorShouldAllow: only a blanket DENY_ALL no_assignment_behavior
  // denies the first request (a token bucket one allows it without a token).
  decision.allowed = !(settings.no_assignment && settings.no_assignment->has_blanket_rule() &&
                       settings.no_assignment->blanket_rule() == RateLimitStrategy::DENY_ALL);
  // global_client_impl.cc createBucketImpl: the first bucket ever starts the report timer and
  // the stream (stream_tried_by_bucket_creation_); later buckets never (re)start the stream.
  if (!stream_tried_) {
    stream_tried_ = true;
    next_tick_ = now + rules_.report_interval;
    stream_open_ = true;
    sent_on_stream_ = false;
    decision.output.new_stream = true;
  }
  // createBucketImpl: QuotaUsage starts at the one request already decided, last_report = now,
  // and the bucket holds the default action (no cached action, no limiter).
  Bucket& b = buckets_[key];
  b.id = bucket;
  b.settings = settings;
  b.last_report = now;
  ++(decision.allowed ? b.allowed : b.denied);
  ToDefault(b, now);
  if (rules_.per_bucket_interval) {
    b.next_report = now + settings.reporting_interval;
  }
  // createBucketImpl: buildReports(cached_bucket), a report of this one bucket, sent at once
  // (time_elapsed: now - last_report = 0 s); dropped if the stream is down, the count reset.
  Reports reports;
  AddUsage(b, reports, now);
  Send(std::move(reports), decision.output);
  return decision;
}

void EnvoyQuotaModel::AddUsage(Bucket& bucket, Reports& reports, absl::Time now) {
  // global_client_impl.cc getUsageFromBucket: the counts since the last report, reset to 0, and
  // time_elapsed = now - last_report, last_report = now. Envoy sends
  // duration_cast<seconds>(elapsed): whole seconds, truncated (4.99 s is sent as 4 s).
  auto* usage = reports.add_bucket_quota_usages();
  *usage->mutable_bucket_id() = bucket.id;
  usage->set_num_requests_allowed(bucket.allowed);
  usage->set_num_requests_denied(bucket.denied);
  bucket.allowed = 0;
  bucket.denied = 0;
  const absl::Duration elapsed = now - bucket.last_report;
  bucket.last_report = now;
  const int64_t seconds = absl::ToInt64Seconds(elapsed);
  usage->mutable_time_elapsed()->set_seconds(seconds);
  if (!rules_.whole_second_elapsed) {
    usage->mutable_time_elapsed()->set_nanos(
        static_cast<int32_t>(absl::ToInt64Nanoseconds(elapsed - absl::Seconds(seconds))));
  }
}

void EnvoyQuotaModel::Send(Reports reports, Output& output) {
  // global_client_impl.cc sendUsageReportImpl: with no stream the message is logged and dropped.
  if (!stream_open_) {
    ++dropped_reports_;
    return;
  }
  // buildReports: report.set_domain(domain_name_) on every message. The API text asks for it in
  // the first message of a stream only.
  if (rules_.domain_in_every_message || !sent_on_stream_) {
    reports.set_domain(domain_);
  }
  sent_on_stream_ = true;
  output.report = std::move(reports);
}

EnvoyQuotaModel::Output EnvoyQuotaModel::Tick(absl::Time now) {
  AdvanceTo(now);
  Output output;
  Reports reports;
  if (!rules_.per_bucket_interval) {
    // global_client_impl.cc onSendReportsTimer: buildReports() of every bucket held (zero usage
    // included; none makes an empty message), before the stream is looked at; the timer is
    // re-armed for send_reports_interval_ after each firing (startSendReportsTimerImpl).
    for (auto& [key, bucket] : buckets_) {
      AddUsage(bucket, reports, now);
    }
    next_tick_ = now + rules_.report_interval;
  } else {
    // API text: each bucket on its own reporting_interval; nothing to send when none is due.
    for (auto& [key, bucket] : buckets_) {
      if (bucket.next_report <= now) {
        AddUsage(bucket, reports, now);
        bucket.next_report = now + bucket.settings.reporting_interval;
      }
    }
    if (reports.bucket_quota_usages().empty()) {
      return output;
    }
  }
  // onSendReportsTimer: a null stream (ended by the server: onRemoteClose) is started again
  // (startStreamImpl); when the start fails (stream_ still null) the tick's reports are dropped,
  // logged, and the next tick tries again. The model asks its caller for a new stream and leaves
  // the start to it: a start that fails shows as that stream ending.
  if (!stream_open_) {
    stream_open_ = true;
    sent_on_stream_ = false;
    output.new_stream = true;
  }
  Send(std::move(reports), output);
  return output;
}

absl::Time EnvoyQuotaModel::NextReportAt() const {
  if (!rules_.per_bucket_interval) {
    return next_tick_;
  }
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, bucket] : buckets_) {
    next = std::min(next, bucket.next_report);
  }
  return next;
}

void EnvoyQuotaModel::OnStreamClosed() {
  // global_client_impl.cc onRemoteClose: stream_ = nullptr.
  stream_open_ = false;
}

bool EnvoyQuotaModel::ShouldReplace(const Bucket& bucket, const Strategy& incoming) const {
  // global_client_impl.cc shouldReplaceTokenBucket: replace unless the cached action
  // (actionHasTokenBucket) holds a token bucket equal to the incoming one.
  if (!bucket.cached_action || !bucket.cached_action->has_quota_assignment_action() ||
      !bucket.cached_action->quota_assignment_action().rate_limit_strategy().has_token_bucket()) {
    return true;
  }
  const auto& old_tb =
      bucket.cached_action->quota_assignment_action().rate_limit_strategy().token_bucket();
  const auto& new_tb = incoming.token_bucket();
  if (rules_.compare_ignores_fill_seconds) {
    // protoTokenBucketsEq: max_tokens, tokens_per_fill.value and fill_interval.nanos; the
    // fill interval's seconds are not compared.
    return !(new_tb.max_tokens() == old_tb.max_tokens() &&
             new_tb.tokens_per_fill().value() == old_tb.tokens_per_fill().value() &&
             new_tb.fill_interval().nanos() == old_tb.fill_interval().nanos());
  }
  return !google::protobuf::util::MessageDifferencer::Equals(new_tb, old_tb);
}

void EnvoyQuotaModel::CountRebuild(const EnvoyTokenBucket& held, const EnvoyTokenBucket& built,
                                   absl::Time now) {
  ++rebuilds_.count;
  if (held.max_tokens() == built.max_tokens() && held.fill_rate() == built.fill_rate()) {
    ++rebuilds_.same_bucket;
  }
  rebuilds_.tokens_gained += std::max(0.0, built.Remaining(now) - held.Remaining(now));
}

EnvoyTokenBucket EnvoyQuotaModel::NewTokenBucket(const Strategy& strategy, const Bucket& bucket,
                                                 absl::Time now) const {
  // global_client_impl.cc createTokenBucketFromAction.
  const auto& tb = strategy.token_bucket();
  const double max_tokens = tb.max_tokens();
  double initial = max_tokens;  // no existing token bucket: full
  if (bucket.limiter && rules_.new_tokens != EnvoyQuotaRules::NewTokens::kFull) {
    // remainingTokens() / maxTokens() of the existing bucket (a NaN from an old max of 0 is
    // taken as full here; Envoy's conversion of it to uint64 is undefined).
    double fraction = bucket.limiter->Remaining(now) / bucket.limiter->max_tokens();
    if (!(fraction >= 0)) {
      fraction = 1;
    }
    // uint64_t initial_tokens = max_tokens * fraction: truncated to whole tokens.
    const double whole = std::floor(max_tokens * fraction);
    if (rules_.new_tokens == EnvoyQuotaRules::NewTokens::kInitFillFromFraction) {
      // ... passed as AtomicTokenBucketImpl's `bool init_fill` (token_bucket_impl.h): any
      // tokens at all start the bucket full, none start it empty.
      initial = whole >= 1 ? max_tokens : 0;
    } else {
      initial = whole;
    }
  }
  return EnvoyTokenBucket(max_tokens, FillRate(tb, rules_), initial, now);
}

absl::Duration EnvoyQuotaModel::Ttl(const google::protobuf::Duration& ttl, bool set) const {
  // global_client_impl.cc startActionExpirationTimer: assignment_time_to_live().seconds() only;
  // 0 (or unset) arms a 0 ms timer: the action expires at once.
  if (!set && rules_.unset_ttl_never_expires) {
    return absl::InfiniteDuration();
  }
  absl::Duration d = absl::Seconds(ttl.seconds());
  if (!rules_.whole_second_ttl) {
    d += absl::Nanoseconds(ttl.nanos());
  }
  return d;
}

absl::Duration EnvoyQuotaModel::Timeout(absl::Duration timeout) const {
  // filter.cc recordBucketUsage: expired_assignment_behavior_timeout().seconds() (0 if unset).
  return rules_.whole_second_ttl ? absl::Seconds(absl::ToInt64Seconds(timeout)) : timeout;
}

void EnvoyQuotaModel::OnResponse(const Response& response, absl::Time now) {
  AdvanceTo(now);
  // global_client_impl.cc onQuotaResponseImpl, action by action.
  for (const Action& action : response.bucket_action()) {
    if (!action.has_bucket_id() || action.bucket_id().bucket().empty()) {
      ++skipped_actions_;  // "a bucket is missing its id": logged, skipped
      continue;
    }
    auto it = buckets_.find(Key(action.bucket_id()));
    if (it == buckets_.end()) {
      ++skipped_actions_;  // "an unexpected bucket that isn't present in the bucket cache"
      continue;
    }
    Bucket& bucket = it->second;
    if (action.has_quota_assignment_action()) {
      const Strategy& strategy = action.quota_assignment_action().rate_limit_strategy();
      switch (strategy.strategy_case()) {
        case Strategy::kBlanketRule:
          // The new CachedBucket is built with no token_bucket_limiter.
          bucket.limiter.reset();
          break;
        case Strategy::kTokenBucket:
          // A new limiter only when shouldReplaceTokenBucket; else the old one is carried over.
          if (ShouldReplace(bucket, strategy)) {
            EnvoyTokenBucket built = NewTokenBucket(strategy, bucket, now);
            if (bucket.limiter) {
              CountRebuild(*bucket.limiter, built, now);
            }
            bucket.limiter = built;
          }
          break;
        case Strategy::kRequestsPerTimeUnit:
        case Strategy::STRATEGY_NOT_SET:
          // "not yet supported" / "Unexpected rate limit strategy": `continue`, so the bucket
          // keeps its previous action, limiter and expiration timer.
          ++skipped_actions_;
          continue;
      }
    } else if (action.has_abandon_action()) {
      // buckets_cache_.erase: the next request creates the bucket again (immediate report).
      buckets_.erase(it);
      continue;
    } else {
      // Neither field: cached as it is (no strategy: requests fail open), without a limiter.
      bucket.limiter.reset();
    }
    // buckets_cache_[id] = the new bucket, then startActionExpirationTimer: every applied
    // action restarts the TTL.
    bucket.cached_action = action;
    bucket.last_from_server = action;
    bucket.mode = EnvoyBucketView::Mode::kAssigned;
    bucket.expires_at =
        now + Ttl(action.quota_assignment_action().assignment_time_to_live(),
                  action.quota_assignment_action().has_assignment_time_to_live());
  }
  RecomputeNextExpiry();
}

void EnvoyQuotaModel::ToDefault(Bucket& bucket, absl::Time at) {
  // A CachedBucket with cached_action = nullptr and token_bucket_limiter = nullptr.
  bucket.mode = EnvoyBucketView::Mode::kNoAssignment;
  bucket.cached_action.reset();
  bucket.limiter.reset();
  bucket.expires_at = absl::InfiniteFuture();
  const Strategy& fallback = DefaultStrategy(bucket);
  if (rules_.default_token_bucket_built && fallback.has_token_bucket()) {
    bucket.limiter.emplace(fallback.token_bucket().max_tokens(),
                           FillRate(fallback.token_bucket(), rules_),
                           fallback.token_bucket().max_tokens(), at);
  }
}

void EnvoyQuotaModel::Expire(Bucket& bucket, absl::Time at) {
  if (bucket.mode == EnvoyBucketView::Mode::kFallback) {
    // global_client_impl.cc onFallbackExpirationTimer: back to the default action.
    ToDefault(bucket, at);
    return;
  }
  // onActionExpirationTimer.
  if (rules_.reuse_last_assignment && bucket.settings.reuse_last_assignment) {
    // API text: reuse the last assignment for expired_assignment_behavior_timeout.
    bucket.mode = EnvoyBucketView::Mode::kFallback;
    bucket.expires_at = at + Timeout(bucket.settings.expired_timeout);
    return;
  }
  if (!bucket.settings.expired_fallback) {
    // No fallback action: the bucket reverts to its default action.
    ToDefault(bucket, at);
    return;
  }
  // The fallback becomes the cached action; a token bucket one replaces the limiter when
  // shouldReplaceTokenBucket (built like an assignment's), else carries it over; any other
  // fallback leaves no limiter. Then startFallbackExpirationTimer(fallback_ttl).
  const Strategy& fallback = *bucket.settings.expired_fallback;
  if (fallback.has_token_bucket()) {
    if (ShouldReplace(bucket, fallback)) {
      bucket.limiter = NewTokenBucket(fallback, bucket, at);
    }
  } else {
    bucket.limiter.reset();
  }
  Action action;
  *action.mutable_quota_assignment_action()->mutable_rate_limit_strategy() = fallback;
  bucket.cached_action = std::move(action);
  bucket.mode = EnvoyBucketView::Mode::kFallback;
  bucket.expires_at = at + Timeout(bucket.settings.expired_timeout);
}

void EnvoyQuotaModel::RecomputeNextExpiry() {
  next_expiry_ = absl::InfiniteFuture();
  for (const auto& [key, bucket] : buckets_) {
    next_expiry_ = std::min(next_expiry_, bucket.expires_at);
  }
}

void EnvoyQuotaModel::AdvanceTo(absl::Time now) {
  // Timers fire in time order, each at its own deadline (a fallback token bucket starts then).
  while (next_expiry_ <= now) {
    Bucket* first = nullptr;
    for (auto& [key, bucket] : buckets_) {
      if (first == nullptr || bucket.expires_at < first->expires_at) {
        first = &bucket;
      }
    }
    if (first == nullptr) {
      break;
    }
    Expire(*first, first->expires_at);
    RecomputeNextExpiry();
  }
}

bool EnvoyQuotaModel::HasBucket(const BucketId& bucket) const {
  return buckets_.count(Key(bucket)) > 0;
}

std::vector<EnvoyQuotaModel::BucketId> EnvoyQuotaModel::Buckets() const {
  std::vector<BucketId> ids;
  for (const auto& [key, bucket] : buckets_) {
    ids.push_back(bucket.id);
  }
  return ids;
}

std::optional<EnvoyBucketView> EnvoyQuotaModel::View(const BucketId& bucket,
                                                     absl::Time now) const {
  auto it = buckets_.find(Key(bucket));
  if (it == buckets_.end()) {
    return std::nullopt;
  }
  const Bucket& b = it->second;
  EnvoyBucketView view;
  view.mode = b.mode;
  if (!b.cached_action) {
    view.strategy = DefaultStrategy(b);
  } else if (b.cached_action->has_quota_assignment_action()) {
    view.strategy = b.cached_action->quota_assignment_action().rate_limit_strategy();
  }
  view.last_action = b.last_from_server;
  if (b.limiter) {
    view.token_bucket =
        EnvoyBucketView::TokenBucket{b.limiter->max_tokens(), b.limiter->fill_rate(),
                                     b.limiter->Remaining(now)};
  }
  view.expires_at = b.expires_at;
  view.allowed = b.allowed;
  view.denied = b.denied;
  return view;
}

}  // namespace sluice
