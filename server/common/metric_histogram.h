// A Prometheus histogram of latencies for hot paths: fixed buckets, one relaxed atomic add per
// observation, no lock, no allocation; rendered in the text format as a `histogram` in seconds.
// (client/latency_histogram.h is the load generator's: exact percentiles, one thread each.)
// prometheus-cpp's Histogram takes a mutex per Observe; this is the lock-free stand-in for the
// request path and the Redis I/O threads. Safe for concurrent use.
//
//   MetricHistogram h;
//   h.Record(elapsed_us);
//   MetricHistogram::AppendHelp(&out, "sluice_request_duration_seconds", "...");
//   h.AppendSeries(&out, "sluice_request_duration_seconds", "transport=\"grpc\"");
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sluice {

class MetricHistogram {
 public:
  // Upper bounds in microseconds that the text format shows: finer around the default 10 ms
  // Redis budget, where an operator asks "within budget or not".
  static constexpr std::array<int64_t, 15> kShownBoundsUs = {
      50,    100,   250,   500,    1000,   2000,   5000,    10000,
      12000, 15000, 25000, 50000, 100000, 250000, 1000000};
  // The bounds counted: the shown ones, plus those that make Prometheus' default buckets
  // (.005 .. 10, in seconds or in milliseconds) exact for CountAtMost (envoyproxy/ratelimit's
  // response_time histogram).
  static constexpr std::array<int64_t, 23> kBoundsUs = {
      5,      10,     25,     50,      100,     250,     500,     1000,
      2000,   2500,   5000,   10000,   12000,   15000,   25000,   50000,
      100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

  // The counts at one moment (not cumulative), to render after the histogram may be gone.
  struct Snapshot {
    std::array<uint64_t, kBoundsUs.size() + 1> buckets{};
    uint64_t sum_us = 0;
  };

  // Counts one observation of `micros` (negative counts as 0).
  void Record(int64_t micros);
  Snapshot snapshot() const;

  // "# HELP" and "# TYPE ... histogram" lines, once per metric family.
  static void AppendHelp(std::string* out, absl::string_view name, absl::string_view help);
  // The family's _bucket, _sum and _count lines of this series. `labels` is the label list
  // without braces ("node=\"10.0.0.1:6379\""), or empty. Buckets are cumulative and the
  // +Inf bucket equals _count, even while other threads record.
  void AppendSeries(std::string* out, absl::string_view name, absl::string_view labels) const {
    AppendSeries(out, name, labels, snapshot());
  }
  static void AppendSeries(std::string* out, absl::string_view name, absl::string_view labels,
                           const Snapshot& counts);
  // The same with the buckets `shown` (each one of kBoundsUs, ascending) for a histogram of
  // longer spans than a call's.
  static void AppendSeries(std::string* out, absl::string_view name, absl::string_view labels,
                           const Snapshot& counts, absl::Span<const int64_t> shown);
  // Buckets for spans of seconds (outages, failure windows): 50 ms to 10 s.
  static constexpr std::array<int64_t, 8> kSpanBoundsUs = {
      50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

  uint64_t count() const;

  // Observations of at most `micros`, from `counts`: exact when `micros` is one of kBoundsUs
  // (then *exact is true); otherwise those up to the largest bound below it, an undercount.
  static uint64_t CountAtMost(const Snapshot& counts, double micros, bool* exact);

 private:
  std::array<std::atomic<uint64_t>, kBoundsUs.size() + 1> buckets_{};  // the last is +Inf
  std::atomic<uint64_t> sum_us_{0};
};

}  // namespace sluice
