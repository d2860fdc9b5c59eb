#include "server/stats/upstream_stats.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "re2/re2.h"
#include "server/stats/prometheus_exposition.h"

namespace sluice {
namespace {

// Upstream's default mapping names these; its refunds' total_negative_hits (envoyproxy/ratelimit
// #1140) it does not, so that one is served under its escaped statsd name, as upstream serves it.
constexpr absl::string_view kRuleCounters[] = {"near_limit", "over_limit", "total_hits",
                                               "within_limit", "shadow_mode"};

// About the bytes one per-rule sample takes once mapped, beside its stat key: the mapped name
// (ratelimit_service_rate_limit_over_limit_with_local_cache), the label names and the value.
constexpr size_t kRuleSampleBytes = 96;

void AddCounter(std::vector<StatsdSample>& out, std::string name, uint64_t value,
                std::shared_ptr<const void> series = nullptr) {
  if (value == 0) {
    return;
  }
  StatsdSample sample;
  sample.name = std::move(name);
  sample.type = StatsdType::kCounter;
  sample.value = value;
  sample.series = std::move(series);
  out.push_back(std::move(sample));
}

}  // namespace

std::string SanitizeStatName(absl::string_view name) {
  static const re2::RE2* const kIpv4 = new re2::RE2(R"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})");
  std::string out(name);
  std::replace(out.begin(), out.end(), ':', '_');
  std::replace(out.begin(), out.end(), '|', '_');
  const re2::StringPiece text(out);
  re2::StringPiece match;
  size_t at = 0;
  while (at < out.size() &&
         kIpv4->Match(text, at, out.size(), re2::RE2::UNANCHORED, &match, 1)) {
    const size_t begin = static_cast<size_t>(match.data() - out.data());
    const size_t end = begin + match.size();
    std::replace(out.begin() + static_cast<std::ptrdiff_t>(begin),
                 out.begin() + static_cast<std::ptrdiff_t>(end), '.', '_');
    at = end;
  }
  return out;
}

std::vector<StatsdSample> UpstreamStatsdSamples(const Metrics& metrics, size_t max_rule_bytes,
                                                size_t* left_out) {
  std::vector<StatsdSample> out;
  std::vector<std::shared_ptr<const RuleSeries>> rules = metrics.RuleSeriesSnapshot();
  // In page order, as many as the estimate lets fit.
  size_t bytes = 0;
  size_t shown = 0;
  for (; shown < rules.size(); ++shown) {
    size_t more = 0;
    for (int c = 0; c < RuleSeries::kCounters; ++c) {
      if (rules[shown]->value(static_cast<RuleSeries::Counter>(c)) != 0) {
        more += rules[shown]->key().size() + kRuleSampleBytes;
      }
    }
    if (bytes + more > max_rule_bytes) {
      break;
    }
    bytes += more;
  }
  if (left_out != nullptr) {
    *left_out = rules.size() - shown;
  }
  rules.resize(shown);
  std::sort(rules.begin(), rules.end(),
            [](const auto& a, const auto& b) { return a->key() < b->key(); });
  for (const auto& rule : rules) {
    const std::string prefix =
        absl::StrCat("ratelimit.service.rate_limit.", SanitizeStatName(rule->key()));
    const std::pair<absl::string_view, RuleSeries::Counter> named[] = {
        {"total_hits", RuleSeries::kTotalHits},
        {"over_limit", RuleSeries::kOverLimit},
        {"near_limit", RuleSeries::kNearLimit},
        {"over_limit_with_local_cache", RuleSeries::kOverLimitWithLocalCache},
        {"within_limit", RuleSeries::kWithinLimit},
        {"shadow_mode", RuleSeries::kShadowMode},
        {"total_negative_hits", RuleSeries::kTotalNegativeHits},
    };
    for (const auto& [suffix, counter] : named) {
      AddCounter(out, absl::StrCat(prefix, ".", suffix), rule->value(counter), rule);
    }
  }
  AddCounter(out, "ratelimit.service.config_load_success", metrics.ConfigsInForce());
  AddCounter(out, "ratelimit.service.config_load_error", metrics.ConfigReloadsRejected());
  AddCounter(out, "ratelimit.service.global_shadow_mode", metrics.GlobalShadowModeRequests());
  AddCounter(out, "ratelimit.service.call.should_rate_limit.redis_error",
             metrics.BackendFailures());
  AddCounter(out, "ratelimit.service.call.should_rate_limit.service_error",
             metrics.Requests(Metrics::RequestOutcome::kInvalidArgument) +
                 metrics.Requests(Metrics::RequestOutcome::kUnavailable));
  StatsdSample response_time;
  response_time.name = "ratelimit_server.ShouldRateLimit.response_time";
  response_time.type = StatsdType::kObserver;
  response_time.observations = metrics.RequestLatency(Transport::kGrpc).snapshot();
  uint64_t calls = 0;
  for (uint64_t bucket : response_time.observations.buckets) {
    calls += bucket;
  }
  AddCounter(out, "ratelimit_server.ShouldRateLimit.total_requests", calls);
  if (calls > 0) {
    out.push_back(std::move(response_time));
  }
  return out;
}

std::string RenderUpstreamPage(const StatsdMapper& mapper, const Metrics& metrics,
                               absl::string_view tail, size_t max_bytes) {
  // What is not per rule is small and bounded (a few dozen names, the process series).
  constexpr size_t kOtherBytes = 32 << 10;
  size_t left_out = 0;
  std::string page = RenderPrometheusText(
      mapper, UpstreamStatsdSamples(metrics, max_bytes > kOtherBytes ? max_bytes - kOtherBytes : 0,
                                    &left_out));
  absl::StrAppend(&page, tail);
  if (page.size() > max_bytes) {
    const size_t end = page.rfind('\n', max_bytes - 1);
    page.resize(end == std::string::npos ? 0 : end + 1);
    absl::StrAppend(&page, "# sluice: page cut at --metrics_max_page_bytes=", max_bytes, "\n");
  }
  if (left_out > 0) {
    absl::StrAppend(&page, "# sluice: ", left_out,
                    " stat keys left out to stay within --metrics_max_page_bytes\n");
  }
  return page;
}

std::string BuiltinStatsdMapping(bool response_time_ms) {
  // Per-rule counters: one key by glob, two keys (and more: the rest is not a label) by regex.
  std::string yaml = "mappings:\n";
  for (absl::string_view counter : kRuleCounters) {
    absl::StrAppend(&yaml, "- match: ratelimit.service.rate_limit.*.*.", counter,
                    "\n  name: ratelimit_service_rate_limit_", counter,
                    "\n  timer_type: histogram\n  labels: {domain: $1, key1: $2}\n");
  }
  for (absl::string_view counter : kRuleCounters) {
    absl::StrAppend(&yaml,
                    "- match: ratelimit\\.service\\.rate_limit\\.([^\\.]*)\\.([^\\.]*)\\."
                    "([^\\.]*)(\\..*)?\\.",
                    counter, "\n  match_type: regex\n  name: ratelimit_service_rate_limit_",
                    counter,
                    "\n  timer_type: histogram\n  labels: {domain: $1, key1: $2, key2: $3}\n");
  }
  absl::StrAppend(
      &yaml,
      "- match: ratelimit.service.call.should_rate_limit.*\n"
      "  name: ratelimit_service_should_rate_limit_error\n"
      "  match_metric_type: counter\n"
      "  labels: {err_type: $1}\n"
      "- match: ratelimit_server.*.total_requests\n"
      "  name: ratelimit_service_total_requests\n"
      "  match_metric_type: counter\n"
      "  labels: {grpc_method: $1}\n"
      "- match: ratelimit_server.*.response_time\n"
      "  name: ratelimit_service_response_time_seconds\n"
      "  timer_type: histogram\n",
      response_time_ms ? "" : "  scale: 0.001\n",
      "  labels: {grpc_method: $1}\n"
      "- match: ratelimit.service.config_load_success\n"
      "  name: ratelimit_service_config_load_success\n"
      "  match_metric_type: counter\n"
      "- match: ratelimit.service.config_load_error\n"
      "  name: ratelimit_service_config_load_error\n"
      "  match_metric_type: counter\n");
  return yaml;
}

}  // namespace sluice
