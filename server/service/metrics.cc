#include "server/service/metrics.h"

#include <algorithm>
#include <atomic>
#include <iterator>

#include "absl/strings/string_view.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"
#include "server/common/prometheus_label.h"

namespace sluice {
namespace {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Gauge& PlainGauge(prometheus::Registry& registry, const std::string& name,
                              const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

constexpr const char* kOutcomeNames[kDecisionOutcomes] = {
    "within_limit",   "over_limit",     "over_limit_cached", "shadow_mode",
    "failure_policy", "never_admitted", "refunded"};

// The per-rule families, in RuleSeries::Counter order.
struct RuleFamily {
  absl::string_view name;
  absl::string_view help;
};
constexpr RuleFamily kRuleFamilies[RuleSeries::kCounters] = {
    {"sluice_rule_total_hits", "Hits evaluated against a rule, by stat key"},
    {"sluice_rule_over_limit", "Hits denied by a rule, by stat key"},
    {"sluice_rule_near_limit", "Hits past --near_limit_ratio of a rule's capacity, by stat key"},
    {"sluice_rule_over_limit_with_local_cache",
     "Hits denied from the over-limit cache, without a backend call, by stat key"},
    {"sluice_rule_within_limit", "Hits admitted by a rule, by stat key"},
    {"sluice_rule_shadow_mode", "Hits over a shadow-mode rule, answered OK"},
    {"sluice_rule_total_negative_hits", "Hits given back to a rule by refunds, by stat key"},
};

// The bytes one series takes on the page: a line in each rule family.
size_t SeriesPageBytes(const RuleSeries& series) {
  size_t bytes = 0;
  for (int c = 0; c < RuleSeries::kCounters; ++c) {
    // name{key="..."} value\n, the value at most 20 digits.
    bytes += kRuleFamilies[c].name.size() + EscapedLabelValueSize(series.key()) + 10 + 20;
  }
  return bytes;
}

prometheus::Counter* ModeCounter(prometheus::Family<prometheus::Counter>& family,
                                 FailureMode mode) {
  return &family.Add({{"mode", std::string(FailureModeName(mode))}});
}

}  // namespace

Metrics::Metrics(MetricsOptions options, const Clock& clock)
    : options_(options),
      rule_series_(RuleSeriesStore::Options{.max_series = options.max_rule_series,
                                            .ttl = options.rule_series_ttl},
                   clock),
      registry_(std::make_shared<prometheus::Registry>()),
      global_shadow_mode_(CounterFamily(*registry_, "sluice_global_shadow_mode_total",
                                        "Requests over limit answered OK by --shadow_mode")
                              .Add({})),
      requests_(CounterFamily(*registry_, "sluice_requests_total",
                              "ShouldRateLimit calls by outcome")),
      backend_failures_(CounterFamily(*registry_, "sluice_backend_failures_total",
                                      "Requests the backend could not decide in budget, "
                                      "answered by the failure policy, by reason (argument: "
                                      "Redis refused Sluice's arguments; decided in process)")),
      failure_policy_(CounterFamily(*registry_, "sluice_failure_policy_decisions_total",
                                    "Descriptors the backend could not decide, by the failure "
                                    "mode that answered them")),
      failure_policy_by_mode_{ModeCounter(failure_policy_, FailureMode::kAllow),
                              ModeCounter(failure_policy_, FailureMode::kDeny),
                              ModeCounter(failure_policy_, FailureMode::kLocal)},
      config_rules_(PlainGauge(*registry_, "sluice_config_rules",
                               "Descriptor nodes with rules in the config in force")),
      config_generation_(PlainGauge(*registry_, "sluice_config_generation",
                                    "Configs put in force since start, the first included")),
      config_load_time_(PlainGauge(*registry_, "sluice_config_load_timestamp_seconds",
                                   "Unix time the config in force was loaded")),
      config_info_(prometheus::BuildGauge()
                       .Name("sluice_config_info")
                       .Help("1 for the version (a digest of its content) of the config in force")
                       .Register(*registry_)),
      decisions_(CounterFamily(*registry_, "sluice_decisions_total",
                               "Descriptors decided, by the algorithm of the rule that answered "
                               "and how")),
      charged_over_limit_(CounterFamily(*registry_, "sluice_hits_charged_over_limit_total",
                                        "Hits of denied requests charged all the same (rules "
                                        "that charge always), by the algorithm of the rule "
                                        "shown")),
      refunded_(CounterFamily(*registry_, "sluice_hits_refunded_total",
                              "Hits given back by refunds (is_negative_hits) that a backend "
                              "applied, by the algorithm of the rule shown")),
      refunds_refused_(CounterFamily(*registry_, "sluice_refunds_refused_total",
                                     "Requests refused because they carry a refund "
                                     "(is_negative_hits) in a domain of --refuse_refunds")
                           .Add({})),
      give_backs_(CounterFamily(*registry_, "sluice_request_give_backs_total",
                                "--request_all_or_nothing: checks of requests answered "
                                "OVER_LIMIT whose hits were sent back to the backend (sent), and "
                                "those it failed to take back (failed)")),
      give_backs_sent_(give_backs_.Add({{"result", "sent"}})),
      give_backs_failed_(give_backs_.Add({{"result", "failed"}})),
      reloads_(CounterFamily(*registry_, "sluice_config_reloads_total",
                             "Config reloads by result")),
      reloads_ok_(reloads_.Add({{"result", "ok"}})),
      reloads_failed_(reloads_.Add({{"result", "rejected"}})) {
  for (int a = 0; a < kAlgorithms; ++a) {
    charged_over_limit_counters_[a] = &charged_over_limit_.Add(
        {{"algorithm", std::string(AlgorithmName(static_cast<Algorithm>(a)))}});
    refunded_counters_[a] =
        &refunded_.Add({{"algorithm", std::string(AlgorithmName(static_cast<Algorithm>(a)))}});
    for (int o = 0; o < kDecisionOutcomes; ++o) {
      decision_counters_[a][o] = &decisions_.Add(
          {{"algorithm", std::string(AlgorithmName(static_cast<Algorithm>(a)))},
           {"outcome", kOutcomeNames[o]}});
    }
  }
  for (int r = 0; r < kFailureReasons; ++r) {
    backend_failure_reasons_[static_cast<size_t>(r)] = &backend_failures_.Add(
        {{"reason", std::string(FailureReasonName(static_cast<FailureReason>(r)))}});
  }
}

void Metrics::CountRequest(RequestOutcome outcome) {
  static constexpr absl::string_view kNames[] = {"ok", "over_limit", "invalid_argument",
                                                 "unavailable"};
  static_assert(std::size(kNames) == std::tuple_size_v<decltype(request_counters_)>);
  const size_t index = static_cast<size_t>(outcome);
  prometheus::Counter* counter = request_counters_[index].load(std::memory_order_acquire);
  if (counter == nullptr) {
    MutexLock lock(requests_mu_);
    counter = request_counters_[index].load(std::memory_order_relaxed);
    if (counter == nullptr) {
      counter = &requests_.Add({{"outcome", std::string(kNames[index])}});
      request_counters_[index].store(counter, std::memory_order_release);
    }
  }
  counter->Increment();
}

void Metrics::CountBackendFailure(FailureReason reason) {
  backend_failure_reasons_[static_cast<size_t>(reason)]->Increment();
}

std::string Metrics::BackendFailureSummary() const {
  std::string summary;
  for (int r = 0; r < kFailureReasons; ++r) {
    const auto count =
        static_cast<uint64_t>(backend_failure_reasons_[static_cast<size_t>(r)]->Value());
    if (count != 0) {
      const std::string_view name = FailureReasonName(static_cast<FailureReason>(r));
      absl::StrAppend(&summary, summary.empty() ? "" : " ",
                      absl::string_view(name.data(), name.size()), "=", count);
    }
  }
  return summary;
}

void Metrics::CountFailurePolicyDecision(FailureMode mode) {
  failure_policy_by_mode_[static_cast<size_t>(mode)]->Increment();
}

void Metrics::CountGlobalShadowMode() { global_shadow_mode_.Increment(); }

void Metrics::CountChargedOverLimit(Algorithm algorithm, uint64_t hits) {
  charged_over_limit_counters_[static_cast<size_t>(algorithm)]->Increment(
      static_cast<double>(hits));
}

void Metrics::CountRefunded(Algorithm algorithm, uint64_t hits) {
  refunded_counters_[static_cast<size_t>(algorithm)]->Increment(static_cast<double>(hits));
}

void Metrics::CountRefusedRefund() { refunds_refused_.Increment(); }

void Metrics::CountGivenBack(size_t checks) {
  give_backs_sent_.Increment(static_cast<double>(checks));
}

void Metrics::CountGiveBackFailure(size_t checks) {
  give_backs_failed_.Increment(static_cast<double>(checks));
}

void Metrics::CountDecision(Algorithm algorithm, DecisionOutcome outcome) {
  decision_counters_[static_cast<size_t>(algorithm)][static_cast<size_t>(outcome)]->Increment();
}

void Metrics::ConfigInForce(size_t rules, absl::string_view version, absl::Time when) {
  config_rules_.Set(static_cast<double>(rules));
  config_generation_.Increment();
  config_load_time_.Set(absl::ToDoubleSeconds(when - absl::UnixEpoch()));
  MutexLock lock(config_mu_);
  if (config_version_ != nullptr) {
    config_info_.Remove(config_version_);
  }
  config_version_ = &config_info_.Add({{"version", std::string(version)}});
  config_version_->Set(1);
}

void Metrics::CountConfigReload(bool ok) { (ok ? reloads_ok_ : reloads_failed_).Increment(); }

void Metrics::XdsConnected(bool connected) {
  MutexLock lock(config_mu_);
  if (xds_connected_ == nullptr) {
    xds_connected_ = &PlainGauge(*registry_, "sluice_xds_connected",
                                 "1 while the stream to the xDS management server delivers");
  }
  xds_connected_->Set(connected ? 1 : 0);
}

void Metrics::CountXdsSnapshot(bool accepted) {
  MutexLock lock(config_mu_);
  if (xds_snapshots_ == nullptr) {
    xds_snapshots_ = &CounterFamily(*registry_, "sluice_xds_snapshots_total",
                                    "Snapshots the xDS management server sent, by result");
  }
  xds_snapshots_->Add({{"result", accepted ? "accepted" : "rejected"}}).Increment();
}

std::vector<std::shared_ptr<const RuleSeries>> Metrics::RuleSeriesSnapshot() const {
  std::vector<std::shared_ptr<const RuleSeries>> series = rule_series_.Snapshot();
  OrderForPage(series);
  return series;
}

uint64_t Metrics::ConfigsInForce() const {
  return static_cast<uint64_t>(config_generation_.Value());
}

uint64_t Metrics::ConfigReloadsRejected() const {
  return static_cast<uint64_t>(reloads_failed_.Value());
}

uint64_t Metrics::GlobalShadowModeRequests() const {
  return static_cast<uint64_t>(global_shadow_mode_.Value());
}

uint64_t Metrics::BackendFailures() const {
  uint64_t total = 0;
  for (const prometheus::Counter* counter : backend_failure_reasons_) {
    total += static_cast<uint64_t>(counter->Value());
  }
  return total;
}

uint64_t Metrics::Requests(RequestOutcome outcome) const {
  const prometheus::Counter* counter =
      request_counters_[static_cast<size_t>(outcome)].load(std::memory_order_acquire);
  return counter == nullptr ? 0 : static_cast<uint64_t>(counter->Value());
}

std::string Metrics::Serialize() const {
  prometheus::TextSerializer serializer;
  std::string text = serializer.Serialize(registry_->Collect());
  constexpr absl::string_view kLatency = "sluice_request_duration_seconds";
  MetricHistogram::AppendHelp(&text, kLatency,
                               "Time from a ShouldRateLimit call's arrival to its answer");
  request_latency_[static_cast<size_t>(Transport::kGrpc)].AppendSeries(&text, kLatency,
                                                                        "transport=\"grpc\"");
  request_latency_[static_cast<size_t>(Transport::kHttp)].AppendSeries(&text, kLatency,
                                                                        "transport=\"http\"");
  AppendRuleSeries(options_.max_page_bytes > text.size() ? options_.max_page_bytes - text.size()
                                                         : 0,
                   &text);
  return text;
}

void Metrics::AppendRuleSeries(size_t max_bytes, std::string* out) const {
  std::vector<std::shared_ptr<const RuleSeries>> series = RuleSeriesSnapshot();
  const size_t all = series.size();
  // The folded series is always shown; then as many as fit, in page order.
  size_t bytes = SeriesPageBytes(rule_series_.folded());
  for (int c = 0; c < RuleSeries::kCounters; ++c) {
    bytes += kRuleFamilies[c].name.size() * 2 + kRuleFamilies[c].help.size() + 32;
  }
  size_t shown = 0;
  while (shown < series.size()) {
    const size_t more = SeriesPageBytes(*series[shown]);
    if (bytes + more > max_bytes) {
      break;
    }
    bytes += more;
    ++shown;
  }
  series.resize(shown);
  std::sort(series.begin(), series.end(),
            [](const auto& a, const auto& b) { return a->key() < b->key(); });
  out->reserve(out->size() + bytes + 1024);
  for (int c = 0; c < RuleSeries::kCounters; ++c) {
    const RuleFamily& family = kRuleFamilies[c];
    absl::StrAppend(out, "# HELP ", family.name, " ", family.help, "\n# TYPE ", family.name,
                    " counter\n");
    const auto counter = static_cast<RuleSeries::Counter>(c);
    const auto append = [&](const RuleSeries& one) {
      absl::StrAppend(out, family.name, "{key=\"");
      AppendLabelValue(one.key(), out);
      absl::StrAppend(out, "\"} ", one.value(counter), "\n");
    };
    append(rule_series_.folded());
    for (const auto& one : series) {
      append(*one);
    }
  }
  absl::StrAppend(
      out,
      "# HELP sluice_rule_keys_folded_total Lookups of stat keys past the per-rule series cap, "
      "counted under key=\"_folded\" instead of their own\n"
      "# TYPE sluice_rule_keys_folded_total counter\n"
      "sluice_rule_keys_folded_total ",
      rule_series_.folds(),
      "\n# HELP sluice_rule_series Stat keys with per-rule series of their own\n"
      "# TYPE sluice_rule_series gauge\n"
      "sluice_rule_series ",
      all,
      "\n# HELP sluice_rule_series_expired_total Per-rule series dropped after "
      "--rule_metric_ttl unused\n"
      "# TYPE sluice_rule_series_expired_total counter\n"
      "sluice_rule_series_expired_total ",
      rule_series_.expired(),
      "\n# HELP sluice_metrics_rule_series_left_out Per-rule series not on this page, which "
      "--metrics_max_page_bytes could not hold (the config's own keys and the most hit are "
      "shown first)\n"
      "# TYPE sluice_metrics_rule_series_left_out gauge\n"
      "sluice_metrics_rule_series_left_out ",
      all - shown, "\n");
}

}  // namespace sluice
