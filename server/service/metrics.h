// Prometheus metrics of the decision path, served at /metrics. Per-rule counters follow
// envoyproxy/ratelimit's names and arithmetic (total_hits, over_limit, near_limit,
// within_limit, shadow_mode, over_limit_with_local_cache) keyed by the rule's stat key. Thread-safe: counters are atomic, and the per-key lookup is a sharded map
// whose entries live as long as the Metrics object.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

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
#include "server/config/failure_mode.h"

namespace sluice {

struct RuleCounters {
  prometheus::Counter* total_hits;
  prometheus::Counter* over_limit;
  prometheus::Counter* within_limit;
  prometheus::Counter* shadow_mode;
  prometheus::Counter* near_limit;
  prometheus::Counter* over_limit_with_local_cache;
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
};
inline constexpr int kDecisionOutcomes = 5;
inline constexpr int kAlgorithms = 6;

class Metrics {
 public:
  // The stat key that the counters of keys past the cap fold into.
  static constexpr absl::string_view kFoldedKey = "_folded";

  // At most about `max_rule_series` stat keys get counters of their own (a detailed_metric rule
  // or a request's limit override makes one per request value, so their number is up to the
  // callers); past that, keys fold into kFoldedKey, counted in sluice_rule_keys_folded_total.
  explicit Metrics(size_t max_rule_series = 10000);

  // Counters of one stat key ("domain.key_value.key2"); created on first use.
  RuleCounters& ForRule(absl::string_view stat_key);

  // Requests answered, by overall code ("ok", "over_limit") or error ("invalid_argument", ...).
  void CountRequest(absl::string_view outcome);
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
  // Time from a request's arrival to its answer, by transport.
  MetricHistogram& RequestLatency(Transport transport) {
    return request_latency_[static_cast<size_t>(transport)];
  }

  // A config was put in force (at start or by a reload): `rules` nodes with rules, `version` a
  // stable digest of its content (the same on every replica that loaded the same files),
  // loaded at `when`. Bumps sluice_config_generation.
  void ConfigInForce(size_t rules, absl::string_view version, absl::Time when);
  void CountConfigReload(bool ok);

  // The text exposition format of every metric.
  std::string Serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& rule_hits_;
  prometheus::Family<prometheus::Counter>& rule_over_limit_;
  prometheus::Family<prometheus::Counter>& rule_within_limit_;
  prometheus::Family<prometheus::Counter>& rule_shadow_mode_;
  prometheus::Family<prometheus::Counter>& rule_near_limit_;
  prometheus::Family<prometheus::Counter>& rule_over_limit_cached_;
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
  // [algorithm][outcome], all created up front.
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Counter* decision_counters_[kAlgorithms][kDecisionOutcomes] = {};
  std::array<MetricHistogram, 2> request_latency_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& reloads_ok_;
  prometheus::Counter& reloads_failed_;

  RuleCounters RuleCountersFor(const std::string& key);

  static constexpr size_t kShards = 16;
  struct Shard {
    Mutex mu;
    absl::flat_hash_map<std::string, RuleCounters> rules ABSL_GUARDED_BY(mu);
  };
  Shard shards_[kShards];
  const size_t max_rules_per_shard_;
  RuleCounters folded_;
  prometheus::Counter& keys_folded_;
  Mutex requests_mu_;
  absl::flat_hash_map<std::string, prometheus::Counter*> request_counters_
      ABSL_GUARDED_BY(requests_mu_);
};

}  // namespace sluice
