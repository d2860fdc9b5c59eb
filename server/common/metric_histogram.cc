#include "server/common/metric_histogram.h"

#include <cmath>
#include <cstddef>

#include "absl/strings/str_cat.h"

namespace sluice {

void MetricHistogram::Record(int64_t micros) {
  if (micros < 0) {
    micros = 0;
  }
  size_t bucket = 0;
  while (bucket < kBoundsUs.size() && micros > kBoundsUs[bucket]) {
    ++bucket;
  }
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<uint64_t>(micros), std::memory_order_relaxed);
}

void MetricHistogram::AppendHelp(std::string* out, absl::string_view name,
                                  absl::string_view help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
}

MetricHistogram::Snapshot MetricHistogram::snapshot() const {
  Snapshot counts;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    counts.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
  }
  counts.sum_us = sum_us_.load(std::memory_order_relaxed);
  return counts;
}

void MetricHistogram::AppendSeries(std::string* out, absl::string_view name,
                                    absl::string_view labels, const Snapshot& counts) {
  AppendSeries(out, name, labels, counts, kShownBoundsUs);
}

void MetricHistogram::AppendSeries(std::string* out, absl::string_view name,
                                    absl::string_view labels, const Snapshot& counts,
                                    absl::Span<const int64_t> shown_bounds) {
  const absl::string_view comma = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  size_t shown = 0;
  for (size_t i = 0; i <= kBoundsUs.size(); ++i) {
    cumulative += counts.buckets[i];
    if (i < kBoundsUs.size() &&
        (shown == shown_bounds.size() || kBoundsUs[i] != shown_bounds[shown])) {
      continue;  // counted, not shown
    }
    const std::string le =
        i < kBoundsUs.size() ? absl::StrCat(static_cast<double>(kBoundsUs[i]) / 1e6) : "+Inf";
    ++shown;
    absl::StrAppend(out, name, "_bucket{", labels, comma, "le=\"", le, "\"} ", cumulative, "\n");
  }
  const absl::string_view open = labels.empty() ? "" : "{";
  const absl::string_view close = labels.empty() ? "" : "}";
  absl::StrAppend(out, name, "_sum", open, labels, close, " ",
                  static_cast<double>(counts.sum_us) / 1e6, "\n", name, "_count", open, labels,
                  close, " ", cumulative, "\n");
}

uint64_t MetricHistogram::CountAtMost(const Snapshot& counts, double micros, bool* exact) {
  uint64_t cumulative = 0;
  *exact = false;
  for (size_t i = 0; i < kBoundsUs.size(); ++i) {
    const auto bound = static_cast<double>(kBoundsUs[i]);
    // Bounds given in seconds or milliseconds rarely convert to whole microseconds exactly.
    const bool equal = std::abs(bound - micros) <= 1e-9 * bound;
    if (bound > micros && !equal) {
      return cumulative;
    }
    cumulative += counts.buckets[i];
    if (equal) {
      *exact = true;
      return cumulative;
    }
  }
  return cumulative;
}

uint64_t MetricHistogram::count() const {
  uint64_t total = 0;
  for (const auto& bucket : buckets_) {
    total += bucket.load(std::memory_order_relaxed);
  }
  return total;
}

}  // namespace sluice
