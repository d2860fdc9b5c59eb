#include "server/service/admin_report.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/common/json_string.h"

namespace sluice {
namespace {

std::string Quoted(absl::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

// A double as JSON: 17 significant digits; JSON has no infinity or NaN, written as null.
std::string Number(double value) {
  if (!std::isfinite(value)) {
    return "null";
  }
  return absl::StrFormat("%.17g", value);
}

const char* Bool(bool value) { return value ? "true" : "false"; }

// "key": value pairs of one object, in order.
class Object {
 public:
  Object& Raw(absl::string_view name, absl::string_view json) {
    absl::StrAppend(&text_, text_.size() > 1 ? "," : "", Quoted(name), ":", json);
    return *this;
  }
  Object& Str(absl::string_view name, absl::string_view value) { return Raw(name, Quoted(value)); }
  template <typename Integer>
  Object& Int(absl::string_view name, Integer value) {
    return Raw(name, absl::StrCat(value));
  }
  Object& Flag(absl::string_view name, bool value) { return Raw(name, Bool(value)); }
  std::string Done() { return text_ + "}"; }

 private:
  std::string text_ = "{";
};

std::string Array(const std::vector<std::string>& items) {
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string EntriesJson(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::vector<std::string> items;
  for (const auto& [key, value] : entries) {
    items.push_back(Object().Str("key", key).Str("value", value).Done());
  }
  return Array(items);
}

std::string KeyJson(const StoredKey& key) {
  Object object;
  object.Str("key", key.key).Str("role", key.role).Flag("exists", key.exists);
  if (key.exists) {
    object.Int("ttl_ms", key.ttl_ms).Flag("readable", key.readable);
  }
  if (!key.note.empty()) {
    object.Str("note", key.note);
  }
  return object.Done();
}

std::string DecisionJson(const Decision& decision) {
  return Object()
      .Flag("allowed", decision.allowed)
      .Int("remaining", decision.remaining)
      .Int("retry_after_us", decision.retry_after_us)
      .Int("reset_after_us", decision.reset_after_us)
      .Done();
}

// The rule as configured, and its storage key: what inspect and reset both show.
Object RuleObject(const RuleReport& rule) {
  Object object;
  if (!rule.name.empty()) {
    object.Str("name", rule.name);
  }
  object.Str("algorithm", AlgorithmName(rule.params.algorithm))
      .Int("limit", rule.params.limit)
      .Str("unit", rule.unit)
      .Int("unit_multiplier", rule.unit_multiplier)
      .Int("period_us", rule.params.period_us);
  switch (rule.params.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
    case Algorithm::kGcra:
      object.Int("burst", rule.params.burst);
      break;
    default:
      break;
  }
  object.Str("charge", ChargeName(rule.params.charge));
  if (rule.params.calendar_months) {
    object.Flag("calendar_months", true);
  }
  if (rule.override_rule) {
    object.Flag("request_override", true);
  }
  object.Str("storage_key", rule.storage_key);
  return object;
}

std::string DescriptorJson(const DescriptorReport& descriptor,
                           const std::vector<std::string>& rules) {
  Object object;
  object.Raw("entries", EntriesJson(descriptor.entries));
  if (!descriptor.limit_override.empty()) {
    object.Str("limit_override", descriptor.limit_override);
  }
  object.Flag("matched", descriptor.matched);
  if (descriptor.unlimited) {
    object.Flag("unlimited", true);
  }
  if (!descriptor.stat_key.empty()) {
    object.Str("stat_key", descriptor.stat_key);
  }
  object.Raw("rules", Array(rules));
  return object.Done();
}

}  // namespace

std::string StateJson(const AlgorithmState& state) {
  Object object;
  if (const auto* fixed = std::get_if<FixedWindowState>(&state)) {
    object.Int("window_start_us", fixed->window_start_us).Int("count", fixed->count);
  } else if (const auto* log = std::get_if<SlidingWindowLogState>(&state)) {
    object.Int("entries", log->entries.size()).Int("total", log->total);
    if (!log->entries.empty()) {
      object.Int("oldest_us", log->entries.front().first)
          .Int("newest_us", log->entries.back().first);
    }
    std::vector<std::string> shown;
    const size_t first =
        log->entries.size() - std::min(log->entries.size(), kMaxReportedLogEntries);
    for (size_t i = first; i < log->entries.size(); ++i) {
      shown.push_back(absl::StrCat("[", log->entries[i].first, ",", log->entries[i].second, "]"));
    }
    object.Raw("log", Array(shown));
  } else if (const auto* counter = std::get_if<SlidingWindowCounterState>(&state)) {
    object.Int("window_start_us", counter->window_start_us)
        .Int("current", counter->current)
        .Int("previous", counter->previous);
  } else if (const auto* bucket = std::get_if<TokenBucketState>(&state)) {
    if (!bucket->initialized) {
      object.Flag("fresh", true);
    } else {
      object.Raw("tokens", Number(bucket->tokens)).Int("last_refill_us", bucket->last_us);
    }
  } else if (const auto* leaky = std::get_if<LeakyBucketState>(&state)) {
    object.Raw("level", Number(leaky->level)).Int("last_leak_us", leaky->last_us);
  } else if (const auto* gcra = std::get_if<GcraState>(&state)) {
    object.Raw("tat_us", Number(gcra->tat_us));
  }
  return object.Done();
}

std::string InspectReportJson(const InspectReport& report) {
  std::vector<std::string> descriptors;
  for (const DescriptorReport& descriptor : report.descriptors) {
    std::vector<std::string> rules;
    for (const RuleReport& rule : descriptor.rules) {
      Object object = RuleObject(rule);
      std::vector<std::string> keys;
      for (const StoredKey& key : rule.state.keys) {
        keys.push_back(KeyJson(key));
      }
      object.Int("now_us", rule.state.now_us)
          .Raw("keys", Array(keys))
          .Raw("state", StateJson(rule.state.state))
          .Raw("check_of_0_hits", DecisionJson(rule.state.answer));
      if (!rule.cache_on) {
        object.Str("over_limit_cache", "off");
      } else if (!rule.cached.has_value()) {
        object.Raw("over_limit_cache", "null");
      } else {
        object.Raw("over_limit_cache", Object()
                                           .Int("denies_for_us", rule.cached->denied_for_us)
                                           .Int("min_hits", rule.cached->min_hits)
                                           .Int("limit", rule.cached->limit)
                                           .Done());
      }
      rules.push_back(object.Done());
    }
    descriptors.push_back(DescriptorJson(descriptor, rules));
  }
  return Object()
             .Str("domain", report.domain)
             .Str("backend", report.backend)
             .Raw("descriptors", Array(descriptors))
             .Done() +
         "\n";
}

std::string ResetReportJson(const ResetReport& report) {
  std::vector<std::string> descriptors;
  for (const DescriptorReport& descriptor : report.descriptors) {
    std::vector<std::string> rules;
    for (const RuleReport& rule : descriptor.rules) {
      rules.push_back(RuleObject(rule).Done());
    }
    descriptors.push_back(DescriptorJson(descriptor, rules));
  }
  std::vector<std::string> deleted;
  for (const std::string& key : report.deleted) {
    deleted.push_back(Quoted(key));
  }
  return Object()
             .Str("domain", report.domain)
             .Str("backend", report.backend)
             .Raw("descriptors", Array(descriptors))
             .Raw("deleted", Array(deleted))
             .Int("forgotten_here", report.forgotten_here)
             .Str("other_replicas", report.other_replicas)
             .Str("result", report.result)
             .Done() +
         "\n";
}

}  // namespace sluice
