// Prometheus metrics of the decision path, served at /metrics. Per-rule counters follow
// envoyproxy/ratelimit's names and arithmetic (total_hits, over_limit, near_limit,
// // within_limit, shadow_mode, over_limit_with_local_cache) keyed by the rule's stat key.
// Thread-safe: counters are atomic and live as long as the Metrics object; the per-key lookup is
// a sharded map that hands out copies of its entries (which move when the map grows).
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
  kNeverAdmitted = 5,    // more hits than the rule can ever hold: denied without a backend
};
inline constexpr int kDecisionOutcomes = 6;
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
  RuleCounters ForRule(absl::string_view stat_key);
  // ForRule(node.full_key), looked up once per node and then kept on it (node.stat_memo): the
  // same counters, without the lookup. A node of a config that another Metrics object got
  // first is looked up every time.
  RuleCounters ForNode(const DescriptorNode& node);

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

  // The text exposition format of every metric.
  std::string Serialize() const;

  // Read when a scrape renders envoyproxy/ratelimit's names (server/stats/upstream_stats.h);
  // the request path does no more work for them.
  // Every stat key with counters of its own (not kFoldedKey), with its counters, copied out
  // one shard at a time.
  std::vector<std::pair<std::string, RuleCounters>> RuleSeries() const;
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
  prometheus::Gauge* xds_connected_ ABSL_GUARDED_BY(config_mu_) = nullptr;
  prometheus::Family<prometheus::Counter>* xds_snapshots_ ABSL_GUARDED_BY(config_mu_) = nullptr;
  // [algorithm][outcome], all created up front.
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Counter* decision_counters_[kAlgorithms][kDecisionOutcomes] = {};
  // [algorithm], all created up front.
  prometheus::Family<prometheus::Counter>& charged_over_limit_;
  prometheus::Counter* charged_over_limit_counters_[kAlgorithms] = {};
  std::array<MetricHistogram, 2> request_latency_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& reloads_ok_;
  prometheus::Counter& reloads_failed_;

  RuleCounters RuleCountersFor(const std::string& key);

  // Tells apart the Metrics objects of one process (tests make several), whose counters a
  // node's memo must not mix up; never reused, unlike an address.
  const uint64_t id_;

  static constexpr size_t kShards = 16;
  struct Shard {
    Mutex mu;
    absl::flat_hash_map<std::string, RuleCounters> rules ABSL_GUARDED_BY(mu);
  };
  mutable Shard shards_[kShards];
  const size_t max_rules_per_shard_;
  RuleCounters folded_;
  prometheus::Counter& keys_folded_;
  // Indexed by RequestOutcome; set once, under requests_mu_, on first use.
  Mutex requests_mu_;
  std::array<std::atomic<prometheus::Counter*>, 4> request_counters_{};
};

}  // namespace sluice
