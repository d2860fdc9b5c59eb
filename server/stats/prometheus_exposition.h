// Renders statsd samples (upstream_stats.h) through a statsd_exporter mapping into the Prometheus
// text format (version 0.0.4), as envoyproxy/ratelimit's statsd_exporter sink shows them:
//   - a counter keeps its mapped name (no `_total` suffix) and the mapped labels; samples that
//     map to the same name and labels add up; a value is multiplied by the rule's scale;
//   - a timer becomes a histogram (with the rule's buckets) or a summary (`_sum` and `_count`
//     only: Sluice keeps no quantiles). Upstream observes milliseconds; the histogram's buckets
//     are Sluice's request histogram re-bucketed: exact where a bound (converted back to
//     microseconds through the scale) is one MetricHistogram counts, as Prometheus' default
//     buckets are in seconds (scale 0.001) and in milliseconds; elsewhere a bucket counts what
//     lies up to the counted bound below it (an undercount);
//   - series of one name may have different label names (one-key and two-key rules);
//   - a sample whose mapped name is already in use with another type is left out
//     (statsd_exporter counts it as a conflict), as is one whose mapped name is empty, and one
//     its rule drops;
//   - families in name order, series in label order, label values escaped.
//
// Pure function; thread-safe as far as the mapper is (it is).
#pragma once

#include <string>
#include <vector>

#include "server/stats/statsd_mapper.h"
#include "server/stats/upstream_stats.h"

namespace sluice {

// A sample value as the text format writes it: the shortest text that reads back as `value`,
// whole numbers without exponent up to 1e15, +Inf, -Inf, NaN.
std::string PrometheusValueText(double value);

std::string RenderPrometheusText(const StatsdMapper& mapper,
                                 const std::vector<StatsdSample>& samples);

}  // namespace sluice
