// Prometheus metrics of the decision path, served at /metrics. Per-rule counters follow
// envoyproxy/ratelimit's names and arithmetic (total_hits, over_limit, near_limit,
// within_limit, shadow_mode, over_limit_with_local_cache) keyed by the rule's stat key, kept in a
// RuleSeriesStore (rule_series.h: bounded in key bytes, number and time); the rest in a
// prometheus-cpp registry whose label sets are all finite.
// Thread-safe: counters are atomic and live as long as the Metrics object.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "absl/time/time.h"
#include "server/algorithm/algorithm.h"
#include "server/common/failure_reason.h"
#include "server/common/metric_histogram.h"
#include "server/common/mutex.h"
#include "server/config/config.h"
#include "server/config/failure_mode.h"
#include "server/service/rule_series.h"

namespace sluice {

struct MetricsOptions {
  // RuleSeriesStore::Options: stat keys made from request values with series of their own
  // (--max_rule_metric_series), and how long an unused series is kept (--rule_metric_ttl).
  size_t max_rule_series = 10000;
  absl::Duration rule_series_ttl = absl::Minutes(10);
  // The largest page Serialize makes (--metrics_max_page_bytes): per-rule series that do not
  // fit are left out (the config's first, then the most hit, are kept), and counted.
  size_t max_page_bytes = 16 << 20;
};

// Where a request came in, for sluice_request_duration_seconds{transport}.
enum class Transport { kGrpc = 0, kHttp = 1 };

// How one descriptor was answered, for sluice_decisions_total{algorithm, outcome}.
enum class DecisionOutcome {
  kWithinLimit = 0,
  kOverLimit = 1,
  kOverLimitCached = 2,  // denied by the over-limit cache, without a backend call
  kShadowMode = 3,       // over a shadow-mode rule, answered OK
  kFailurePolicy = 4,    // the backend could not decide; failure_mode answered
  kNeverAdmitted = 5,    // more hits than the rule can ever hold: denied without a backend
  kRefunded = 6,         // a refund (is_negative_hits): given back, answered OK
};
inline constexpr int kDecisionOutcomes = 7;
inline constexpr int kAlgorithms = kAlgorithmCount;

class Metrics {
 public:
  // The stat key that the counters of keys past the cap fold into.
  static constexpr absl::string_view kFoldedKey = RuleSeriesStore::kFoldedKey;

  // `clock` (for the series' ttl) must outlive the object.
  explicit Metrics(MetricsOptions options, const Clock& clock = RealClock::Get());
  // At most about `max_rule_series` stat keys made from request values get counters of their
  // own; past that they fold into kFoldedKey, counted in sluice_rule_keys_folded_total.
  explicit Metrics(size_t max_rule_series = 10000)
      : Metrics(MetricsOptions{.max_rule_series = max_rule_series}) {}

  // Adds one descriptor's hits to the counters of `stat_key` ("domain.key_value.key2"), a key
  // made from the request's values (detailed_metric, value_to_metric, a limit override).
  void CountRule(absl::string_view stat_key, const RuleHits& hits) {
    rule_series_.Count(stat_key, hits);
  }
  // The same for node.full_key, the config's own key: found once per node, then kept on it.
  void CountNode(const DescriptorNode& node, const RuleHits& hits) {
    rule_series_.CountNode(node, hits);
  }

  // Requests answered, by overall code or error: sluice_requests_total{outcome="ok"} and so on,
  // each series created on first use.
  enum class RequestOutcome { kOk, kOverLimit, kInvalidArgument, kUnavailable };
  void CountRequest(RequestOutcome outcome);
  // A request the backend could not decide in its budget, answered by the failure policy.
  void CountBackendFailure(FailureReason reason);
  // "reason=count" of every reason counted so far, space-separated ("" if none), for /readyz.
  std::string BackendFailureSummary() const;
  // One descriptor the backend could not decide, answered by failure mode `mode`.
  void CountFailurePolicyDecision(FailureMode mode);
  // A request over limit answered OK because of the global shadow mode.
  void CountGlobalShadowMode();
  // One descriptor decided by a rule of `algorithm` (the rule that answered it).
  void CountDecision(Algorithm algorithm, DecisionOutcome outcome);
  // Hits charged by denied requests (rules that charge always), by the algorithm of the rule
  // shown: sluice_hits_charged_over_limit_total{algorithm}.
  void CountChargedOverLimit(Algorithm algorithm, uint64_t hits);
  // Hits given back by a refund a backend applied, by the algorithm of the rule shown:
  // sluice_hits_refunded_total{algorithm}.
  void CountRefunded(Algorithm algorithm, uint64_t hits);
  // A request refused for a refund in a domain of --refuse_refunds:
  // sluice_refunds_refused_total.
  void CountRefusedRefund();
  // --request_all_or_nothing: checks of requests answered OVER_LIMIT whose hits were sent back
  // to the backend (sluice_request_give_backs_total{result="sent"}), and those the backend then
  // failed to take back (result="failed").
  void CountGivenBack(size_t checks);
  void CountGiveBackFailure(size_t checks);
  // Time from a request's arrival to its answer, by transport.
  MetricHistogram& RequestLatency(Transport transport) {
    return request_latency_[static_cast<size_t>(transport)];
  }

  // A config was put in force (at start or by a reload): `rules` nodes with rules, `version` a
  // stable digest of its content (the same on every replica that loaded the same files),
  // loaded at `when`. Bumps sluice_config_generation.
  void ConfigInForce(size_t rules, absl::string_view version, absl::Time when);
  void CountConfigReload(bool ok);
  // --config_source=xds: whether the stream to the management server is delivering
  // (sluice_xds_connected), and each snapshot it sent, accepted or rejected
  // (sluice_xds_snapshots_total{result}). The series exist once first set.
  void XdsConnected(bool connected);
  void CountXdsSnapshot(bool accepted);

  // The text exposition format of every metric, at most options.max_page_bytes long (a few
  // hundred bytes more for the line that counts what was left out).
  std::string Serialize() const;

  // Read when a scrape renders envoyproxy/ratelimit's names (server/stats/upstream_stats.h);
  // the request path does no more work for them.
  // Every stat key with counters of its own (not kFoldedKey), in page order (OrderForPage),
  // copied out one shard at a time; unused ones past their ttl are dropped first.
  std::vector<std::shared_ptr<const RuleSeries>> RuleSeriesSnapshot() const;
  // Configs put in force since start (the first included), and reloads rejected.
  uint64_t ConfigsInForce() const;
  uint64_t ConfigReloadsRejected() const;
  // Requests over limit answered OK by the global shadow mode.
  uint64_t GlobalShadowModeRequests() const;
  // Requests answered by the failure policy, over every reason.
  uint64_t BackendFailures() const;
  // Requests answered with `outcome` so far.
  uint64_t Requests(RequestOutcome outcome) const;
  const MetricHistogram& RequestLatency(Transport transport) const {
    return request_latency_[static_cast<size_t>(transport)];
  }

 private:
  const MetricsOptions options_;
  // Swept of expired series by the scrapes that read it (const ones included).
  mutable RuleSeriesStore rule_series_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter& global_shadow_mode_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& backend_failures_;
  // One series per reason, all created up front (the label set is bounded).
  std::array<prometheus::Counter*, kFailureReasons> backend_failure_reasons_{};
  prometheus::Family<prometheus::Counter>& failure_policy_;
  // Indexed by FailureMode's value (kAllow, kDeny, kLocal: 0, 1, 2).
  prometheus::Counter* const failure_policy_by_mode_[3];
  prometheus::Gauge& config_rules_;
  prometheus::Gauge& config_generation_;
  prometheus::Gauge& config_load_time_;
  prometheus::Family<prometheus::Gauge>& config_info_;
  Mutex config_mu_;
  prometheus::Gauge* config_version_ ABSL_GUARDED_BY(config_mu_) = nullptr;
  prometheus::Gauge* xds_connected_ ABSL_GUARDED_BY(config_mu_) = nullptr;
  prometheus::Family<prometheus::Counter>* xds_snapshots_ ABSL_GUARDED_BY(config_mu_) = nullptr;
  // [algorithm][outcome], all created up front.
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Counter* decision_counters_[kAlgorithms][kDecisionOutcomes] = {};
  // [algorithm], all created up front.
  prometheus::Family<prometheus::Counter>& charged_over_limit_;
  prometheus::Counter* charged_over_limit_counters_[kAlgorithms] = {};
  prometheus::Family<prometheus::Counter>& refunded_;
  prometheus::Counter* refunded_counters_[kAlgorithms] = {};
  prometheus::Counter& refunds_refused_;
  prometheus::Family<prometheus::Counter>& give_backs_;
  prometheus::Counter& give_backs_sent_;
  prometheus::Counter& give_backs_failed_;
  std::array<MetricHistogram, 2> request_latency_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& reloads_ok_;
  prometheus::Counter& reloads_failed_;

  // Appends the per-rule families for as many series as fit in `max_bytes`, and the lines
  // that say how many series there are and how many were left out.
  void AppendRuleSeries(size_t max_bytes, std::string* out) const;

  // Indexed by RequestOutcome; set once, under requests_mu_, on first use.
  Mutex requests_mu_;
  std::array<std::atomic<prometheus::Counter*>, 4> request_counters_{};
};

}  // namespace sluice
