#include "server/stats/prometheus_exposition.h"

#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/metric_histogram.h"
#include "server/common/prometheus_label.h"

namespace sluice {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class Kind { kCounter, kHistogram, kSummary };

struct Series {
  double value = 0;                  // a counter
  std::vector<double> buckets;       // a histogram: its bounds (the first sample's)
  std::vector<uint64_t> cumulative;  // and per bound, observations at most it
  double sum = 0;                    // histograms and summaries
  uint64_t count = 0;
};

struct Family {
  Kind kind = Kind::kCounter;
  std::string help;
  std::map<Labels, Series> series;
};

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  AppendLabelValue(value, &out);
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// `{a="x",b="y"` plus `extra` (already formatted), closed; "" when there is nothing.
std::string LabelText(const Labels& labels, absl::string_view extra = "") {
  if (labels.empty() && extra.empty()) {
    return "";
  }
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    absl::StrAppend(&out, out.size() > 1 ? "," : "", name, "=\"", EscapeLabelValue(value), "\"");
  }
  if (!extra.empty()) {
    absl::StrAppend(&out, out.size() > 1 ? "," : "", extra);
  }
  out.push_back('}');
  return out;
}

// The family `mapped` belongs in, created if new; null if the name is taken by another type.
// Several sets of label names may share a family, as statsd_exporter's unchecked collectors
// allow (Envoy Gateway's dashboard reads one-key and two-key series of one name).
Family* FamilyFor(std::map<std::string, Family>& families, const MappedMetric& mapped, Kind kind) {
  auto [it, created] = families.try_emplace(mapped.name);
  Family& family = it->second;
  if (created) {
    family.kind = kind;
    family.help = mapped.help;
  }
  return family.kind == kind ? &family : nullptr;
}

void AddObservations(const StatsdSample& sample, const MappedMetric& mapped, Kind kind,
                     Series& series) {
  const double scale = mapped.scale.value_or(1.0);
  uint64_t count = 0;
  for (uint64_t bucket : sample.observations.buckets) {
    count += bucket;
  }
  series.count += count;
  // Microseconds to upstream's milliseconds, then the rule's scale.
  series.sum += static_cast<double>(sample.observations.sum_us) / 1000.0 * scale;
  if (kind != Kind::kHistogram) {
    return;
  }
  if (series.buckets.empty()) {
    series.buckets = mapped.buckets;
    series.cumulative.assign(series.buckets.size(), 0);
  }
  for (size_t i = 0; i < series.buckets.size(); ++i) {
    // An observation of m ms is at most bound b when m * scale <= b.
    bool exact = false;
    series.cumulative[i] += MetricHistogram::CountAtMost(
        sample.observations, series.buckets[i] * 1000.0 / scale, &exact);
  }
}

}  // namespace

std::string PrometheusValueText(double value) {
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  if (std::isnan(value)) {
    return "NaN";
  }
  if (value == std::floor(value) && std::abs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string RenderPrometheusText(const StatsdMapper& mapper,
                                 const std::vector<StatsdSample>& samples) {
  std::map<std::string, Family> families;
  for (const StatsdSample& sample : samples) {
    const std::shared_ptr<const MappedMetric> mapped = mapper.Map(sample.name, sample.type);
    if (mapped->drop || mapped->name.empty()) {
      continue;
    }
    Kind kind = Kind::kCounter;
    if (sample.type == StatsdType::kObserver) {
      kind = mapped->observer_type == ObserverType::kHistogram ? Kind::kHistogram
                                                                : Kind::kSummary;
    }
    Family* family = FamilyFor(families, *mapped, kind);
    if (family == nullptr) {
      continue;
    }
    Series& series = family->series[mapped->labels];
    if (kind == Kind::kCounter) {
      series.value += static_cast<double>(sample.value) * mapped->scale.value_or(1.0);
    } else {
      AddObservations(sample, *mapped, kind, series);
    }
  }

  std::string out;
  for (const auto& [name, family] : families) {
    static constexpr absl::string_view kTypes[] = {"counter", "histogram", "summary"};
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(family.help), "\n# TYPE ", name, " ",
                    kTypes[static_cast<int>(family.kind)], "\n");
    for (const auto& [labels, series] : family.series) {
      if (family.kind == Kind::kCounter) {
        absl::StrAppend(&out, name, LabelText(labels), " ", PrometheusValueText(series.value), "\n");
        continue;
      }
      if (family.kind == Kind::kHistogram) {
        for (size_t i = 0; i < series.buckets.size(); ++i) {
          absl::StrAppend(&out, name, "_bucket",
                          LabelText(labels, absl::StrCat("le=\"", PrometheusValueText(series.buckets[i]),
                                                         "\"")),
                          " ", series.cumulative[i], "\n");
        }
        absl::StrAppend(&out, name, "_bucket", LabelText(labels, "le=\"+Inf\""), " ",
                        series.count, "\n");
      }
      absl::StrAppend(&out, name, "_sum", LabelText(labels), " ", PrometheusValueText(series.sum), "\n",
                      name, "_count", LabelText(labels), " ", series.count, "\n");
    }
  }
  return out;
}

}  // namespace sluice
