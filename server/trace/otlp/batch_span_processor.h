// The SpanSink of production: it queues ended spans and exports them in batches from one
// background thread, so that the decision path never waits for a collector. Submit only takes a
// mutex to push onto a bounded queue; a full queue drops the span. A batch (up to
// max_export_spans) goes out as soon as the queue holds a full one, or once export_interval has
// passed since the oldest waiting span was queued. A failed export is not retried (retries would
// pile up spans while the collector is down): its spans are dropped and counted, and the failure
// logged at most once every 10 seconds.
//
// Thread-safety: Submit, the counters and AppendMetrics are safe from any thread, concurrently.
// Shutdown may be called from any thread, more than once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"
#include "server/trace/otlp/span_exporter.h"
#include "server/trace/span_sink.h"

namespace sluice {

struct BatchSpanProcessorOptions {
  // Spans waiting for export at most; more are dropped. REQUIRES: >= 1.
  size_t max_queue_spans = 2048;
  // Spans in one export at most. REQUIRES: >= 1.
  size_t max_export_spans = 512;
  // How long a span waits at most for its batch to fill. REQUIRES: > 0.
  absl::Duration export_interval = absl::Seconds(5);
};

class BatchSpanProcessor final : public SpanSink {
 public:
  // Starts the export thread. `clock` (MonotonicMicros: the spans' waiting time and the
  // shutdown's grace) must outlive the processor.
  BatchSpanProcessor(std::unique_ptr<SpanExporter> exporter, BatchSpanProcessorOptions options,
                     const Clock& clock = RealClock::Get());
  // Shutdown(kDestructorGrace).
  ~BatchSpanProcessor() override;
  BatchSpanProcessor(const BatchSpanProcessor&) = delete;
  BatchSpanProcessor& operator=(const BatchSpanProcessor&) = delete;

  static constexpr absl::Duration kDestructorGrace = absl::Seconds(1);

  // Queues `span`, or drops it (counted) when the queue is full or the processor is shut down.
  // Never blocks on the exporter and does no I/O.
  void Submit(SpanData span) override ABSL_LOCKS_EXCLUDED(mu_);

  // Exports what is queued, in batches, for up to `grace`, then stops the export thread; spans
  // still queued then are dropped and counted as export_failed. An export in progress is not
  // interrupted: with a collector that does not answer, this returns within `grace` plus the
  // exporter's own timeout. Later calls return at once; Submit drops from then on.
  void Shutdown(absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_, shutdown_mu_);

  // Spans dropped: the queue was full (or the processor shut down), plus the spans of failed
  // exports.
  uint64_t spans_dropped() const ABSL_LOCKS_EXCLUDED(mu_);
  // Spans of exports the exporter reported as successful.
  uint64_t spans_exported() const ABSL_LOCKS_EXCLUDED(mu_);
  // Exports that failed.
  uint64_t exports_failed() const ABSL_LOCKS_EXCLUDED(mu_);
  // Spans waiting now.
  size_t queue_spans() const ABSL_LOCKS_EXCLUDED(mu_);

  // Appends the counters in the Prometheus text format: sluice_tracing_spans_dropped_total
  // {reason="queue_full"|"export_failed"}, sluice_tracing_spans_exported_total,
  // sluice_tracing_exports_failed_total, and the gauge sluice_tracing_queue_spans.
  void AppendMetrics(std::string* out) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Queued {
    int64_t queued_us;  // clock_.MonotonicMicros() when submitted
    SpanData span;
  };

  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Takes up to max_export_spans from the queue's front, exports them with mu_ released, and
  // counts the outcome.
  void ExportBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<SpanExporter> exporter_;
  const BatchSpanProcessorOptions options_;
  const Clock& clock_;

  mutable Mutex mu_;
  CondVar wake_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // When stopping_: the end of the grace, clock_.MonotonicMicros().
  int64_t flush_deadline_us_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_queue_full_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_export_failed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t exported_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t exports_failed_ ABSL_GUARDED_BY(mu_) = 0;

  // Serializes Shutdown's callers: the second waits for the first's join, then returns.
  Mutex shutdown_mu_;
  std::thread thread_ ABSL_GUARDED_BY(shutdown_mu_);
};

}  // namespace sluice
