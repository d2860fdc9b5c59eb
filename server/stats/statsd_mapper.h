// statsd_exporter's mapping language (prometheus/statsd_exporter pkg/mapper, v0.26, the version
// envoyproxy/ratelimit vendors), for serving envoyproxy/ratelimit's Prometheus names: a YAML file
// of rules that turn a statsd name ("ratelimit.service.rate_limit.foo.bar_baz.total_hits") and
// its statsd type into a Prometheus name with labels
// (ratelimit_service_rate_limit_total_hits{domain="foo",key1="bar_baz"}), or drop it.
//
// What a file may hold, and how it matches (as statsd_exporter does):
//   defaults:  match_type (glob | regex), timer_type / observer_type (histogram | summary),
//              buckets, histogram_options: {buckets}
//   mappings:  a list; each rule has match, name (required, even with action: drop), labels,
//              match_type, match_metric_type (counter | gauge | observer; timer means
//              observer), action (map | drop), timer_type / observer_type, buckets,
//              histogram_options: {buckets}, scale, help, honor_labels (no effect: Sluice's
//              statsd names carry no tags)
//   - glob: `*` stands for one whole dot-separated component (possibly empty); a pattern has as
//     many components as the names it matches. Captures are `$1`, `${1}` in name and labels.
//   - regex: RE2 syntax (Go's), searched unanchored as Go's FindStringSubmatchIndex does;
//     `$1`, `${1}`, `$name`, `${name}`, `$$` expand as Go's Regexp.ExpandString.
//   - Every glob rule is tried before any regex rule; among each kind, the first rule in the
//     file that matches (its match_metric_type included) wins.
//   - A name no rule matches is kept, escaped: every character outside [a-zA-Z0-9_] becomes
//     `_` ("--" becomes one `_`), and a leading digit gets a `_` in front.
//   - The mapped name is escaped the same way. scale multiplies every value (counters too).
//   - An observer (a timer) becomes a histogram or a summary; with neither in the rule nor in
//     the defaults it is a summary. Histogram buckets default to Prometheus' DefBuckets
//     (.005 .. 10).
// Refused, "<file>:<line>: <field>: <what>": YAML errors, unknown keys, keys statsd_exporter
// knows but Sluice does not implement (ttl, quantiles, summary_options, glob_disable_ordering,
// native histogram options), bad values, and what statsd_exporter itself refuses (a name or
// label name it would not take, a glob pattern outside its grammar, a regex that does not
// compile).
//
// Thread-safe once built: Map() may be called from any thread. Each (name, type) is mapped once
// and kept in a cache of bounded size (cleared whole when full).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/common/mutex.h"

namespace re2 {
class RE2;
}

namespace sluice {

// The statsd type of a name; a timer is an observer.
enum class StatsdType { kCounter = 0, kGauge = 1, kObserver = 2 };

// What an observer becomes in Prometheus.
enum class ObserverType { kHistogram, kSummary };

// What one statsd name maps to.
struct MappedMetric {
  // A rule matched (otherwise the name is the statsd name escaped, with no label).
  bool matched = false;
  // The matching rule says action: drop; nothing else is meaningful.
  bool drop = false;
  // The Prometheus name, escaped.
  std::string name;
  // Label names and values, sorted by name.
  std::vector<std::pair<std::string, std::string>> labels;
  ObserverType observer_type = ObserverType::kSummary;
  // Histogram upper bounds, ascending, without +Inf.
  std::vector<double> buckets;
  // Multiplies every value when set.
  std::optional<double> scale;
  // The HELP text.
  std::string help;
  // 1-based line of the matching rule in its file; 0 when unmatched.
  int rule_line = 0;
};

class StatsdMapper {
 public:
  // Most (name, type) pairs the cache keeps by default.
  static constexpr size_t kDefaultCacheEntries = 100'000;
  // A mapping file larger than this is refused before it is parsed.
  static constexpr size_t kMaxFileBytes = 1 << 20;

  // Parses `yaml`, named `file_name` in errors. kInvalidArgument naming file, line and field.
  static absl::StatusOr<std::unique_ptr<StatsdMapper>> FromYaml(
      absl::string_view file_name, absl::string_view yaml,
      size_t cache_entries = kDefaultCacheEntries);
  // Reads and parses the file at `path`; also kNotFound / kInvalidArgument when it cannot be
  // read or is larger than kMaxFileBytes.
  static absl::StatusOr<std::unique_ptr<StatsdMapper>> FromFile(
      const std::string& path, size_t cache_entries = kDefaultCacheEntries);

  ~StatsdMapper();
  StatsdMapper(const StatsdMapper&) = delete;
  StatsdMapper& operator=(const StatsdMapper&) = delete;

  // What `statsd_name` of `type` maps to. Never null. The result stays valid as long as the
  // caller holds it, cache clears included.
  std::shared_ptr<const MappedMetric> Map(absl::string_view statsd_name, StatsdType type) const;

  // Rules in the file.
  size_t rule_count() const;
  // Times Map() had to match a name (cache misses), for tests.
  size_t matches_computed() const;

 private:
  friend class StatsdMappingParser;
  struct Rule;
  struct Defaults {
    ObserverType observer_type = ObserverType::kSummary;
    std::vector<double> buckets;
  };
  StatsdMapper(std::vector<std::unique_ptr<Rule>> rules, Defaults defaults, size_t cache_entries);
  std::shared_ptr<const MappedMetric> Compute(absl::string_view statsd_name,
                                              StatsdType type) const;

  const std::vector<std::unique_ptr<Rule>> rules_;
  // What applies to a name no rule matches.
  const Defaults defaults_;
  const size_t cache_entries_;
  mutable Mutex mu_;
  mutable absl::flat_hash_map<std::string, std::shared_ptr<const MappedMetric>> cache_
      ABSL_GUARDED_BY(mu_);
  mutable size_t matches_computed_ ABSL_GUARDED_BY(mu_) = 0;
};

// statsd_exporter's escaping of a metric name (see above).
std::string EscapeMetricName(absl::string_view name);

}  // namespace sluice
