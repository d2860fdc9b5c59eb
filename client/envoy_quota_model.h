// A pure model of one Envoy's rate_limit_quota filter (the RLQS client) for one domain: what it
// decides for each request, which usage reports it sends and when, and what it makes of each
// bucket action the server sends. Time is passed in (no clock, no sleeping, no I/O): the caller
// sends what the model returns over its stream and tells it when the stream ends.
//
// Every rule cites the Envoy source it is taken from (source/extensions/filters/http/
// rate_limit_quota/ and source/common/common/token_bucket_impl.{h,cc}, as read in Envoy's main
// branch whose createTokenBucketFromAction takes the existing token bucket; the stream, report,
// token-bucket, TTL and abandon rules checked again against global_client_impl.cc at
// envoyproxy/envoy commit c33e7f824b99 on 2026-11-28). Two profiles:
//   kEnvoy    what that source does, including where it departs from the API's comments;
//   kApiText  a client that follows the API comments instead (rlqs.proto, token_bucket.proto,
//             rate_limit_quota.proto's bucket settings), to show what Sluice must accept from a
//             client that is not today's Envoy.
// EnvoyQuotaRules spells out each difference, so a test can also switch one rule alone.
//
// Not thread-safe: one caller at a time (RlqsEmulatedEnvoy wraps it in a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"

namespace sluice {

enum class EnvoyQuotaProfile { kEnvoy, kApiText };

// "envoy" or "api" (sluice-bench --rlqs_profile); nullopt for anything else.
std::optional<EnvoyQuotaProfile> ParseEnvoyQuotaProfile(const std::string& name);
const char* EnvoyQuotaProfileName(EnvoyQuotaProfile profile);

// The rules where the two profiles differ. For(kEnvoy) and For(kApiText) are the two presets.
struct EnvoyQuotaRules {
  // How a token bucket that replaces another one starts.
  enum class NewTokens {
    // Envoy as built: createTokenBucketFromAction computes
    // uint64 initial = max_tokens * (remaining / old max) and passes it as the 4th argument of
    // AtomicTokenBucketImpl, whose 4th parameter is `bool init_fill` (token_bucket_impl.h): the
    // new bucket starts full when initial >= 1 and empty when it is 0.
    kInitFillFromFraction,
    // What createTokenBucketFromAction's comment intends: floor(max_tokens * fraction) tokens.
    kFraction,
    // token_bucket.proto: max_tokens "is also the number of tokens that the bucket initially
    // contains".
    kFull,
  };

  // Report period of every bucket (kEnvoy: filter_persistence.cc initTlsStore hard-codes
  // 5000 ms, bucket settings' reporting_interval unused). Ignored when per_bucket_interval.
  absl::Duration report_interval = absl::Seconds(5);
  // Each bucket reported on its own EnvoyBucketSettings::reporting_interval (rate_limit_quota.proto
  // bucket settings); a tick then carries only the buckets that are due, and none when none is.
  bool per_bucket_interval = false;
  // time_elapsed truncated to whole seconds (global_client_impl.cc getUsageFromBucket:
  // duration_cast<seconds>); false: exact, with nanos.
  bool whole_second_elapsed = true;
  // The domain in every message (global_client_impl.cc buildReports: report.set_domain on each);
  // false: only in the first message of each stream (rlqs.proto).
  bool domain_in_every_message = true;
  // protoTokenBucketsEq compares max_tokens, tokens_per_fill and fill_interval.nanos only: an
  // assignment that changes only fill_interval.seconds keeps the old token bucket.
  // false: any field that differs builds a new one.
  bool compare_ignores_fill_seconds = true;
  // Fill rate = tokens_per_fill / whole seconds of fill_interval (createTokenBucketFromAction:
  // absl::ToInt64Seconds; under 1 s divides by 0); false: / the exact interval.
  bool whole_second_fill_interval = true;
  // tokens_per_fill unset counts as 1 (token_bucket.proto); Envoy reads value() of the unset
  // wrapper, 0, and the bucket refills at AtomicTokenBucketImpl's floor of 1 token a year.
  bool unset_tokens_per_fill_is_one = false;
  NewTokens new_tokens = NewTokens::kInitFillFromFraction;
  // assignment_time_to_live and expired_assignment_behavior_timeout in whole seconds
  // (startActionExpirationTimer: .seconds(); filter.cc recordBucketUsage: .seconds()).
  bool whole_second_ttl = true;
  // An unset assignment_time_to_live never expires (this repository's rlqs.proto comment);
  // Envoy reads .seconds() of the unset field, 0: the assignment expires at once.
  bool unset_ttl_never_expires = false;
  // expired_assignment_behavior.reuse_last_assignment honoured; Envoy reads only
  // fallback_rate_limit (filter.cc recordBucketUsage) and falls back to no_assignment_behavior.
  bool reuse_last_assignment = false;
  // A token bucket as no_assignment_behavior gets a limiter (full). Envoy builds none:
  // createBucketImpl and both expiry paths leave token_bucket_limiter null, and
  // filter.cc shouldAllowRequest dereferences it (see envoy_would_crash()).
  bool default_token_bucket_built = false;

  static EnvoyQuotaRules For(EnvoyQuotaProfile profile);
};

// What the bucket matcher's RateLimitQuotaBucketSettings say for one bucket (read when the bucket
// is created, as filter.cc recordBucketUsage does).
struct EnvoyBucketSettings {
  // no_assignment_behavior.fallback_rate_limit; nullopt: not configured, ALLOW_ALL.
  std::optional<envoy::type::v3::RateLimitStrategy> no_assignment;
  // expired_assignment_behavior: fallback_rate_limit, or reuse_last_assignment (kApiText only),
  // applied for `expired_timeout` (expired_assignment_behavior_timeout) once an assignment
  // expires; then back to no_assignment.
  std::optional<envoy::type::v3::RateLimitStrategy> expired_fallback;
  bool reuse_last_assignment = false;
  absl::Duration expired_timeout = absl::ZeroDuration();
  // reporting_interval; used only when EnvoyQuotaRules::per_bucket_interval.
  absl::Duration reporting_interval = absl::Seconds(5);
};

// Envoy's AtomicTokenBucketImpl (token_bucket_impl.h/.cc) on an injected time: the bucket is the
// moment it was empty; tokens = min(max, (now - that moment) * rate); consuming moves the moment.
class EnvoyTokenBucket {
 public:
  // `initial_tokens` (0..max): the level at `now`. fill_rate is floored at 1 token a year
  // (kMinFillRate); an infinite or NaN rate (a fill interval under 1 s in whole seconds) leaves
  // the bucket always at max, as Envoy's std::min(max, NaN) does.
  EnvoyTokenBucket(double max_tokens, double fill_rate, double initial_tokens, absl::Time now);

  // AtomicTokenBucketImpl::consume(1, false): true when a whole token was there.
  bool Consume(absl::Time now);
  // AtomicTokenBucketImpl::remainingTokens.
  double Remaining(absl::Time now) const;
  double max_tokens() const { return max_tokens_; }
  double fill_rate() const { return fill_rate_; }

 private:
  double Level(absl::Time now) const;

  double max_tokens_;
  double fill_rate_;
  absl::Time empty_at_;
};

// A bucket as the model holds it (for tests and RlqsEmulatedEnvoy's accessors).
struct EnvoyBucketView {
  enum class Mode {
    kNoAssignment,  // default action: no_assignment_behavior
    kAssigned,      // the server's last action (an assignment, or an action with neither field)
    kFallback,      // expired: expired_assignment_behavior (fallback, or reused assignment)
  };
  Mode mode = Mode::kNoAssignment;
  // The strategy requests are decided by now (for kNoAssignment: no_assignment, or ALLOW_ALL).
  envoy::type::v3::RateLimitStrategy strategy;
  // The last action applied from the server (kept after it expires); nullopt before the first.
  std::optional<envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse::BucketAction>
      last_action;
  struct TokenBucket {
    double max_tokens = 0;
    double fill_rate = 0;  // tokens a second
    double tokens = 0;     // at the time asked
  };
  std::optional<TokenBucket> token_bucket;
  absl::Time expires_at = absl::InfiniteFuture();  // when the current mode ends
  uint64_t allowed = 0;  // since the last report
  uint64_t denied = 0;
};

class EnvoyQuotaModel {
 public:
  using BucketId = envoy::service::rate_limit_quota::v3::BucketId;
  using Reports = envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;
  using Response = envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;

  // What the caller must do after a call: open a new stream first when `new_stream`, then send
  // `report` when there is one.
  struct Output {
    bool new_stream = false;
    std::optional<Reports> report;
  };
  struct Decision {
    bool allowed = true;
    Output output;
  };

  EnvoyQuotaModel(EnvoyQuotaProfile profile, std::string domain,
                  EnvoyBucketSettings settings = {});
  EnvoyQuotaModel(EnvoyQuotaRules rules, std::string domain, EnvoyBucketSettings settings = {});

  // One request matched into `bucket` at `now` (times passed to the model must not go back).
  // A bucket seen for the first time is created with `settings` (the constructor's when not
  // given) and reported at once; the first bucket ever also opens the stream and starts the
  // report timer.
  Decision OnRequest(const BucketId& bucket, absl::Time now);
  Decision OnRequest(const BucketId& bucket, const EnvoyBucketSettings& settings, absl::Time now);

  // The report timer firing at `now` (the caller calls it at NextReportAt(), or whenever it
  // likes): reopens the stream if it was ended, and builds the message. kEnvoy: every bucket,
  // even none (an empty message). kApiText: the buckets due; no message when none is.
  Output Tick(absl::Time now);
  // When the report timer fires next; InfiniteFuture before the first bucket.
  absl::Time NextReportAt() const;

  // A response from the server, applied at `now`.
  void OnResponse(const Response& response, absl::Time now);
  // The server ended the stream (onRemoteClose): nothing is sent until the next tick reopens it.
  void OnStreamClosed();

  // Runs the expiry timers due by `now` (every other call does so first).
  void AdvanceTo(absl::Time now);

  // Accessors. `now` only evaluates the token level; nothing expires.
  bool HasBucket(const BucketId& bucket) const;
  std::optional<EnvoyBucketView> View(const BucketId& bucket, absl::Time now) const;
  std::vector<BucketId> Buckets() const;
  bool stream_open() const { return stream_open_; }
  // Reports built while the stream was ended (Envoy resets the counters and drops them).
  uint64_t dropped_reports() const { return dropped_reports_; }
  // Actions skipped: no bucket id, unknown bucket, requests_per_time_unit, no strategy.
  uint64_t skipped_actions() const { return skipped_actions_; }
  // Token buckets an assignment rebuilt while one was held (shouldReplaceTokenBucket): how
  // many, how many of them had the held one's size and rate (a renewal Envoy read as a new
  // bucket: only the compared nanos differed), and the tokens the rebuilds added at once (a
  // rebuilt bucket starts full or empty, NewTokens).
  struct Rebuilds {
    uint64_t count = 0;
    uint64_t same_bucket = 0;
    double tokens_gained = 0;
  };
  const Rebuilds& rebuilds() const { return rebuilds_; }
  // kEnvoy with a token bucket as no_assignment_behavior: filter.cc shouldAllowRequest would
  // dereference the null token_bucket_limiter (Envoy crashes); the model allows and sets this.
  bool envoy_would_crash() const { return envoy_would_crash_; }
  const EnvoyQuotaRules& rules() const { return rules_; }

  // The fill rate, tokens a second, Envoy builds from `bucket` under `rules`.
  static double FillRate(const envoy::type::v3::TokenBucket& bucket, const EnvoyQuotaRules& rules);
  static BucketId MakeBucketId(const std::vector<std::pair<std::string, std::string>>& pairs);

 private:
  using Strategy = envoy::type::v3::RateLimitStrategy;
  using Action = Response::BucketAction;

  // Envoy's CachedBucket (quota_bucket_cache.h), plus the per-bucket report time of kApiText.
  struct Bucket {
    BucketId id;
    EnvoyBucketSettings settings;
    EnvoyBucketView::Mode mode = EnvoyBucketView::Mode::kNoAssignment;
    // cached_action: the action requests are decided by (the server's, or one built from the
    // fallback); nullopt: default_action (no_assignment).
    std::optional<Action> cached_action;
    std::optional<Action> last_from_server;
    std::optional<EnvoyTokenBucket> limiter;  // token_bucket_limiter
    absl::Time expires_at = absl::InfiniteFuture();
    uint64_t allowed = 0;  // QuotaUsage
    uint64_t denied = 0;
    absl::Time last_report;
    absl::Time next_report = absl::InfiniteFuture();  // per_bucket_interval only
  };

  static std::string Key(const BucketId& bucket);
  Decision Create(const BucketId& bucket, const std::string& key,
                  const EnvoyBucketSettings& settings, absl::Time now);
  bool Decide(Bucket& bucket, absl::Time now);
  void AddUsage(Bucket& bucket, Reports& reports, absl::Time now);
  void Send(Reports reports, Output& output);
  bool ShouldReplace(const Bucket& bucket, const Strategy& incoming) const;
  EnvoyTokenBucket NewTokenBucket(const Strategy& strategy, const Bucket& bucket,
                                  absl::Time now) const;
  void CountRebuild(const EnvoyTokenBucket& held, const EnvoyTokenBucket& built, absl::Time now);
  absl::Duration Ttl(const google::protobuf::Duration& ttl, bool set) const;
  absl::Duration Timeout(absl::Duration timeout) const;
  const Strategy& DefaultStrategy(const Bucket& bucket) const;
  void ToDefault(Bucket& bucket, absl::Time at);
  void Expire(Bucket& bucket, absl::Time at);
  void RecomputeNextExpiry();

  EnvoyQuotaRules rules_;
  std::string domain_;
  EnvoyBucketSettings settings_;
  std::map<std::string, Bucket> buckets_;  // ordered: reports list buckets in a stable order
  bool stream_tried_ = false;
  bool stream_open_ = false;
  bool sent_on_stream_ = false;
  absl::Time next_tick_ = absl::InfiniteFuture();
  absl::Time next_expiry_ = absl::InfiniteFuture();
  uint64_t dropped_reports_ = 0;
  uint64_t skipped_actions_ = 0;
  Rebuilds rebuilds_;
  bool envoy_would_crash_ = false;
};

}  // namespace sluice
