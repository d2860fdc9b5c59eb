#include "server/trace/otlp/batch_span_processor.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"

namespace sluice {

BatchSpanProcessor::BatchSpanProcessor(std::unique_ptr<SpanExporter> exporter,
                                       BatchSpanProcessorOptions options, const Clock& clock)
    : exporter_(std::move(exporter)), options_(options), clock_(clock) {
  thread_ = std::thread([this] { Run(); });
}

BatchSpanProcessor::~BatchSpanProcessor() { Shutdown(kDestructorGrace); }

void BatchSpanProcessor::Submit(SpanData span) {
  const int64_t now_us = clock_.MonotonicMicros();
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (stopping_ || queue_.size() >= options_.max_queue_spans) {
      ++dropped_queue_full_;
      return;
    }
    queue_.push_back({now_us, std::move(span)});
    // The thread sleeps without a deadline while the queue is empty, and until the oldest span's
    // interval ends otherwise: it needs waking when either changes.
    wake = queue_.size() == 1 || queue_.size() == options_.max_export_spans;
  }
  if (wake) {
    wake_.NotifyOne();
  }
}

void BatchSpanProcessor::Shutdown(absl::Duration grace) {
  MutexLock shutdown_lock(shutdown_mu_);
  if (!thread_.joinable()) {
    return;
  }
  {
    MutexLock lock(mu_);
    stopping_ = true;
    flush_deadline_us_ = clock_.MonotonicMicros() + absl::ToInt64Microseconds(grace);
  }
  wake_.NotifyAll();
  thread_.join();
}

void BatchSpanProcessor::Run() {
  const int64_t interval_us = absl::ToInt64Microseconds(options_.export_interval);
  MutexLock lock(mu_);
  while (true) {
    if (stopping_) {
      while (!queue_.empty() && clock_.MonotonicMicros() < flush_deadline_us_) {
        ExportBatch();
      }
      dropped_export_failed_ += queue_.size();
      queue_.clear();
      return;
    }
    if (queue_.empty()) {
      wake_.Wait(mu_);
      continue;
    }
    const int64_t waited_us = clock_.MonotonicMicros() - queue_.front().queued_us;
    if (queue_.size() >= options_.max_export_spans || waited_us >= interval_us) {
      ExportBatch();
      continue;
    }
    wake_.WaitFor(mu_, interval_us - waited_us);
  }
}

void BatchSpanProcessor::ExportBatch() {
  const size_t size = std::min(queue_.size(), options_.max_export_spans);
  std::vector<SpanData> batch;
  batch.reserve(size);
  for (size_t i = 0; i < size; ++i) {
    batch.push_back(std::move(queue_.front().span));
    queue_.pop_front();
  }
  mu_.Unlock();
  const absl::Status status = exporter_->Export(batch);
  if (!status.ok()) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "tracing: " << size << " spans dropped: " << LogStatus(status)
        << " (failed exports are not retried; sluice_tracing_spans_dropped_total counts them)";
  }
  mu_.Lock();
  if (status.ok()) {
    exported_ += size;
  } else {
    ++exports_failed_;
    dropped_export_failed_ += size;
  }
}

uint64_t BatchSpanProcessor::spans_dropped() const {
  MutexLock lock(mu_);
  return dropped_queue_full_ + dropped_export_failed_;
}

uint64_t BatchSpanProcessor::spans_exported() const {
  MutexLock lock(mu_);
  return exported_;
}

uint64_t BatchSpanProcessor::exports_failed() const {
  MutexLock lock(mu_);
  return exports_failed_;
}

size_t BatchSpanProcessor::queue_spans() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void BatchSpanProcessor::AppendMetrics(std::string* out) const {
  uint64_t queue_full = 0, export_failed = 0, exported = 0, failed = 0;
  size_t queued = 0;
  {
    MutexLock lock(mu_);
    queue_full = dropped_queue_full_;
    export_failed = dropped_export_failed_;
    exported = exported_;
    failed = exports_failed_;
    queued = queue_.size();
  }
  absl::StrAppend(
      out,
      "# HELP sluice_tracing_spans_dropped_total Spans not exported: the export queue was full "
      "(queue_full), or their export failed (export_failed)\n"
      "# TYPE sluice_tracing_spans_dropped_total counter\n"
      "sluice_tracing_spans_dropped_total{reason=\"queue_full\"} ",
      queue_full, "\n",
      "sluice_tracing_spans_dropped_total{reason=\"export_failed\"} ", export_failed, "\n",
      "# HELP sluice_tracing_spans_exported_total Spans the collector accepted\n"
      "# TYPE sluice_tracing_spans_exported_total counter\n"
      "sluice_tracing_spans_exported_total ",
      exported, "\n",
      "# HELP sluice_tracing_exports_failed_total Exports to the collector that failed (their "
      "spans are dropped, not retried)\n"
      "# TYPE sluice_tracing_exports_failed_total counter\n"
      "sluice_tracing_exports_failed_total ",
      failed, "\n",
      "# HELP sluice_tracing_queue_spans Spans waiting for export\n"
      "# TYPE sluice_tracing_queue_spans gauge\n"
      "sluice_tracing_queue_spans ",
      queued, "\n");
}

}  // namespace sluice
