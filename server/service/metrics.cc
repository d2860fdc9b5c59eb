#include "server/service/metrics.h"

#include <algorithm>

#include "absl/strings/string_view.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace sluice {
namespace {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Counter* ModeCounter(prometheus::Family<prometheus::Counter>& family,
                                 FailureMode mode) {
  return &family.Add({{"mode", std::string(FailureModeName(mode))}});
}

}  // namespace

Metrics::Metrics(size_t max_rule_series)
    : registry_(std::make_shared<prometheus::Registry>()),
      rule_hits_(CounterFamily(*registry_, "sluice_rule_total_hits",
                               "Hits evaluated against a rule, by stat key")),
      rule_over_limit_(CounterFamily(*registry_, "sluice_rule_over_limit",
                                     "Hits denied by a rule, by stat key")),
      rule_within_limit_(CounterFamily(*registry_, "sluice_rule_within_limit",
                                       "Hits admitted by a rule, by stat key")),
      rule_shadow_mode_(CounterFamily(*registry_, "sluice_rule_shadow_mode",
                                      "Hits over a shadow-mode rule, answered OK")),
      rule_near_limit_(CounterFamily(*registry_, "sluice_rule_near_limit",
                                     "Hits past --near_limit_ratio of a rule's capacity, by "
                                     "stat key")),
      rule_over_limit_cached_(CounterFamily(*registry_, "sluice_rule_over_limit_with_local_cache",
                                            "Hits denied from the over-limit cache, without a "
                                            "backend call, by stat key")),
      global_shadow_mode_(CounterFamily(*registry_, "sluice_global_shadow_mode_total",
                                        "Requests over limit answered OK by --shadow_mode")
                              .Add({})),
      requests_(CounterFamily(*registry_, "sluice_requests_total",
                              "ShouldRateLimit calls by outcome")),
      backend_failures_(CounterFamily(*registry_, "sluice_backend_failures_total",
                                      "Requests the backend could not decide in budget, "
                                      "answered by the failure policy, by reason")),
      failure_policy_(CounterFamily(*registry_, "sluice_failure_policy_decisions_total",
                                    "Descriptors the backend could not decide, by the failure "
                                    "mode that answered them")),
      failure_policy_by_mode_{ModeCounter(failure_policy_, FailureMode::kAllow),
                              ModeCounter(failure_policy_, FailureMode::kDeny),
                              ModeCounter(failure_policy_, FailureMode::kLocal)},
      config_rules_(prometheus::BuildGauge()
                        .Name("sluice_config_rules")
                        .Help("Descriptor nodes with rules in the config in force")
                        .Register(*registry_)
                        .Add({})),
      reloads_(CounterFamily(*registry_, "sluice_config_reloads_total",
                             "Config reloads by result")),
      reloads_ok_(reloads_.Add({{"result", "ok"}})),
      reloads_failed_(reloads_.Add({{"result", "rejected"}})),
      max_rules_per_shard_(std::max<size_t>(1, max_rule_series / kShards)),
      folded_(RuleCountersFor(std::string(kFoldedKey))),
      keys_folded_(CounterFamily(*registry_, "sluice_rule_keys_folded_total",
                                 "Lookups of stat keys past the per-rule series cap, counted "
                                 "under key=\"_folded\" instead of their own")
                       .Add({})) {
  for (int r = 0; r < kFailureReasons; ++r) {
    backend_failure_reasons_[static_cast<size_t>(r)] = &backend_failures_.Add(
        {{"reason", std::string(FailureReasonName(static_cast<FailureReason>(r)))}});
  }
}

RuleCounters& Metrics::ForRule(absl::string_view stat_key) {
  Shard& shard = shards_[absl::HashOf(stat_key) % kShards];
  MutexLock lock(shard.mu);
  auto it = shard.rules.find(stat_key);
  if (it != shard.rules.end()) {
    return it->second;
  }
  if (shard.rules.size() >= max_rules_per_shard_) {
    keys_folded_.Increment();
    return folded_;
  }
  std::string key(stat_key);
  RuleCounters counters = RuleCountersFor(key);
  return shard.rules.emplace(std::move(key), counters).first->second;
}

RuleCounters Metrics::RuleCountersFor(const std::string& key) {
  return RuleCounters{
      &rule_hits_.Add({{"key", key}}),
      &rule_over_limit_.Add({{"key", key}}),
      &rule_within_limit_.Add({{"key", key}}),
      &rule_shadow_mode_.Add({{"key", key}}),
      &rule_near_limit_.Add({{"key", key}}),
      &rule_over_limit_cached_.Add({{"key", key}}),
  };
}

void Metrics::CountRequest(absl::string_view outcome) {
  prometheus::Counter* counter;
  {
    MutexLock lock(requests_mu_);
    auto it = request_counters_.find(outcome);
    if (it == request_counters_.end()) {
      std::string name(outcome);
      it = request_counters_.emplace(name, &requests_.Add({{"outcome", name}})).first;
    }
    counter = it->second;
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

void Metrics::SetConfigRules(double rules) { config_rules_.Set(rules); }

void Metrics::CountConfigReload(bool ok) { (ok ? reloads_ok_ : reloads_failed_).Increment(); }

std::string Metrics::Serialize() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

}  // namespace sluice
