// envoyproxy/ratelimit's statsd names, produced at scrape time from Sluice's own counters
// (server/service/metrics.h), and the mapping upstream applies to them by default when it serves
// Prometheus (USE_PROMETHEUS). prometheus_exposition.h turns these samples into the text format
// through a mapping, as upstream's statsd_exporter sink does; statsd_sink.h sends them to a
// statsd, as upstream's gostats and DogStatsD sinks do (USE_STATSD, USE_DOG_STATSD).
//
// What upstream emits, and what Sluice produces of it (each name only once it is non-zero, as
// upstream's stats library flushes a counter only when it moved):
//   ratelimit.service.rate_limit.<stat key>.total_hits / over_limit / near_limit /
//     within_limit / shadow_mode / over_limit_with_local_cache      yes: the per-rule counters
//     (<stat key> as upstream sanitizes it: ':' and '|' become '_', and so do the dots of an
//     IPv4 address). Keys past --max_rule_metric_series (Sluice's "_folded") are left out.
//   ratelimit.service.rate_limit.<stat key>.total_negative_hits       yes: hits refunds gave
//     back (is_negative_hits); upstream's default mapping has no rule for it, so it is served
//     under its escaped name, as upstream's statsd sink serves it
//   ratelimit.service.config_load_success / config_load_error        yes: configs put in force
//     (the first included) / reloads rejected
//   ratelimit.service.global_shadow_mode                              yes
//   ratelimit.service.call.should_rate_limit.redis_error              yes: requests the backend
//     could not decide (Sluice answers them by --failure_mode where upstream fails the call)
//   ratelimit.service.call.should_rate_limit.service_error            yes: requests refused as
//     invalid, or while no config is loaded
//   ratelimit_server.ShouldRateLimit.total_requests / response_time   yes: gRPC calls and their
//     durations (upstream reports whole milliseconds; Sluice the exact duration in ms)
//   ratelimit.service.rate_limit.<domain>.domain_not_found            no: not counted by Sluice
//   ratelimit_server.<health method>.*, ratelimit.go.* (Go runtime), ratelimit.localcache.*
//     (freecache), ratelimit.redis_pool.* / redis_per_second_pool.* (Go Redis pool), memcache
//                                                                      no: no such part
//
// Pure functions over a Metrics that other threads keep counting into; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/common/metric_histogram.h"
#include "server/service/metrics.h"
#include "server/stats/statsd_mapper.h"

namespace sluice {

// One statsd name with its value at the moment of the scrape.
struct StatsdSample {
  std::string name;
  StatsdType type = StatsdType::kCounter;
  // Counters: the total so far.
  uint64_t value = 0;
  // Observers: the observations so far, in microseconds (upstream observes milliseconds: the
  // renderer divides by 1000 before the mapping's scale).
  MetricHistogram::Snapshot observations;
  // Per-rule counters: the series the value was read from. A later value under the same name
  // from another series counts from 0 (the key's series was dropped and made again); the statsd
  // sink sends increases. Null for the others, which never start again.
  std::shared_ptr<const void> series;
};

// Every statsd name above that Sluice can produce and that is non-zero now, with the per-rule
// ones of as many stat keys as an estimate of their mapped size lets fit in `max_rule_bytes`
// (the config's keys first, then the most hit: OrderForPage); *left_out, if given, receives
// how many keys did not fit.
std::vector<StatsdSample> UpstreamStatsdSamples(const Metrics& metrics,
                                                size_t max_rule_bytes = SIZE_MAX,
                                                size_t* left_out = nullptr);

// Upstream's page for one scrape: the samples above rendered through `mapper`
// (RenderPrometheusText), then `tail` (the process series), in at most `max_bytes`: per-rule
// keys that do not fit by estimate are left out, and a page still too long is cut after its
// last whole line within the bound; a comment line at the end says what was left out.
std::string RenderUpstreamPage(const StatsdMapper& mapper, const Metrics& metrics,
                               absl::string_view tail, size_t max_bytes);

// envoyproxy/ratelimit's utils.SanitizeStatName: ':' and '|' become '_', and so do the dots of
// anything that looks like an IPv4 address (four runs of 1-3 digits).
std::string SanitizeStatName(absl::string_view name);

// The mapping upstream uses without PROMETHEUS_MAPPER_YAML, with the same rules as its
// default_mapper.yaml; `response_time_ms` (PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS) leaves
// response times in milliseconds by dropping the rule's scale, as upstream does.
std::string BuiltinStatsdMapping(bool response_time_ms);

// The name mapping errors give the built-in mapping.
inline constexpr absl::string_view kBuiltinMappingName = "(built-in mapping)";

}  // namespace sluice
