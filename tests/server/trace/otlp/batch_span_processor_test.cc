#include "server/trace/otlp/batch_span_processor.h"

#include <chrono>
#include <memory>
#include <string>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/mutex.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);
// Long enough that no test sees a partial batch leave on its own.
constexpr absl::Duration kNever = absl::Hours(1);

// Records each batch; can fail, hold every export until released, or take a fixed time.
class FakeExporter final : public SpanExporter {
 public:
  absl::Status Export(absl::Span<const SpanData> spans) override {
    MutexLock lock(mu_);
    std::vector<std::string> names;
    for (const SpanData& span : spans) {
      names.push_back(std::string(span.name));
    }
    batches_.push_back(std::move(names));
    changed_.NotifyAll();
    while (held_) {
      changed_.Wait(mu_);
    }
    if (delay_ > absl::ZeroDuration()) {
      const auto until = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(delay_);
      while (std::chrono::steady_clock::now() < until) {
        changed_.WaitUntil(mu_, until);
      }
    }
    return result_;
  }
  std::string Describe() const override { return "fake exporter"; }

  void Hold(bool held) {
    MutexLock lock(mu_);
    held_ = held;
    changed_.NotifyAll();
  }
  void SetResult(absl::Status result) {
    MutexLock lock(mu_);
    result_ = std::move(result);
  }
  void SetDelay(absl::Duration delay) {
    MutexLock lock(mu_);
    delay_ = delay;
  }
  // True once Export has been called `n` times, waiting up to `timeout`.
  bool WaitForCalls(size_t n, absl::Duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    MutexLock lock(mu_);
    while (batches_.size() < n && std::chrono::steady_clock::now() < deadline) {
      changed_.WaitUntil(mu_, deadline);
    }
    return batches_.size() >= n;
  }
  std::vector<std::vector<std::string>> batches() {
    MutexLock lock(mu_);
    return batches_;
  }
  std::vector<size_t> sizes() {
    std::vector<size_t> sizes;
    for (const auto& batch : batches()) {
      sizes.push_back(batch.size());
    }
    return sizes;
  }

 private:
  Mutex mu_;
  CondVar changed_;
  std::vector<std::vector<std::string>> batches_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_);
  absl::Status result_ ABSL_GUARDED_BY(mu_);
};

// A span named `name`. Span names are views of storage that outlives the span (literals in
// Sluice): the names made here are kept for the whole test program.
SpanData Named(const std::string& name) {
  static std::mutex mu;
  static std::deque<std::string>* names = new std::deque<std::string>();
  SpanData span;
  std::lock_guard<std::mutex> lock(mu);
  span.name = names->emplace_back(name);
  return span;
}

class BatchSpanProcessorTest : public ::testing::Test {
 protected:
  void Start(BatchSpanProcessorOptions options) {
    auto exporter = std::make_unique<FakeExporter>();
    exporter_ = exporter.get();
    processor_ = std::make_unique<BatchSpanProcessor>(std::move(exporter), options);
  }
  void Submit(int n, const std::string& prefix = "span") {
    for (int i = 0; i < n; ++i) {
      processor_->Submit(Named(absl::StrCat(prefix, i)));
    }
  }

  FakeExporter* exporter_ = nullptr;  // owned by processor_
  std::unique_ptr<BatchSpanProcessor> processor_;
};

// Verifies that a full batch leaves at once, without waiting for the interval, that no batch
// is larger than max_export_spans, and that spans keep their order.
TEST_F(BatchSpanProcessorTest, ExportsFullBatchesAtOnce) {
  Start({.max_queue_spans = 100, .max_export_spans = 4, .export_interval = kNever});
  Submit(10);
  ASSERT_TRUE(exporter_->WaitForCalls(2, kWait));
  EXPECT_THAT(exporter_->sizes(), ElementsAre(4, 4));
  EXPECT_THAT(exporter_->batches()[1], ElementsAre("span4", "span5", "span6", "span7"));
  // Two spans are not a batch: they wait for the interval (or the shutdown).
  EXPECT_EQ(processor_->queue_spans(), 2u);
  processor_->Shutdown(kWait);
  EXPECT_THAT(exporter_->sizes(), ElementsAre(4, 4, 2));
  EXPECT_EQ(processor_->spans_exported(), 10u);
  EXPECT_EQ(processor_->spans_dropped(), 0u);
}

// Verifies that a partial batch leaves once export_interval has passed since its oldest span,
// and not before.
TEST_F(BatchSpanProcessorTest, ExportsAPartialBatchAfterTheInterval) {
  const absl::Duration interval = absl::Milliseconds(60);
  Start({.max_queue_spans = 100, .max_export_spans = 100, .export_interval = interval});
  const auto start = std::chrono::steady_clock::now();
  Submit(3);
  ASSERT_TRUE(exporter_->WaitForCalls(1, kWait));
  const absl::Duration waited = absl::FromChrono(std::chrono::steady_clock::now() - start);
  EXPECT_GE(waited, interval);
  EXPECT_LT(waited, interval + absl::Seconds(2));
  EXPECT_THAT(exporter_->sizes(), ElementsAre(3));

  // The timer starts again with the next span.
  Submit(1, "later");
  ASSERT_TRUE(exporter_->WaitForCalls(2, kWait));
  EXPECT_THAT(exporter_->batches()[1], ElementsAre("later0"));
}

// Verifies that while the exporter is stuck, Submit neither blocks nor grows the queue past
// max_queue_spans: the excess is dropped and counted; the queue drains once the exporter moves.
TEST_F(BatchSpanProcessorTest, DropsWhenTheQueueIsFullWithoutBlocking) {
  Start({.max_queue_spans = 4, .max_export_spans = 2, .export_interval = kNever});
  exporter_->Hold(true);
  Submit(2, "first");
  ASSERT_TRUE(exporter_->WaitForCalls(1, kWait));  // stuck in the collector with two spans

  const auto start = std::chrono::steady_clock::now();
  Submit(10, "more");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(processor_->queue_spans(), 4u);
  EXPECT_EQ(processor_->spans_dropped(), 6u);

  exporter_->Hold(false);
  processor_->Shutdown(kWait);
  EXPECT_THAT(exporter_->sizes(), ElementsAre(2, 2, 2));
  EXPECT_THAT(exporter_->batches()[2], ElementsAre("more2", "more3"));
  EXPECT_EQ(processor_->spans_exported(), 6u);
  EXPECT_EQ(processor_->spans_dropped(), 6u);
}

// Verifies that a failed export's spans are dropped and counted, not retried.
TEST_F(BatchSpanProcessorTest, CountsFailedExportsWithoutRetrying) {
  Start({.max_queue_spans = 100, .max_export_spans = 2, .export_interval = kNever});
  exporter_->SetResult(absl::UnavailableError("collector down"));
  Submit(4);
  processor_->Shutdown(kWait);
  EXPECT_THAT(exporter_->sizes(), ElementsAre(2, 2));  // each span offered once
  EXPECT_EQ(processor_->exports_failed(), 2u);
  EXPECT_EQ(processor_->spans_dropped(), 4u);
  EXPECT_EQ(processor_->spans_exported(), 0u);
}

// Verifies that Shutdown exports what is queued, returns at once when called again, and that
// spans submitted after it are dropped.
TEST_F(BatchSpanProcessorTest, ShutdownFlushesAndIsIdempotent) {
  Start({.max_queue_spans = 100, .max_export_spans = 3, .export_interval = kNever});
  Submit(2);
  EXPECT_TRUE(exporter_->batches().empty());
  processor_->Shutdown(kWait);
  EXPECT_THAT(exporter_->sizes(), ElementsAre(2));
  processor_->Shutdown(kWait);
  Submit(1, "late");
  EXPECT_EQ(processor_->spans_dropped(), 1u);
  EXPECT_EQ(exporter_->batches().size(), 1u);
}

// Verifies that Shutdown stops exporting when its grace ends: the rest is counted as dropped,
// and it returns after at most the grace plus the export in progress.
TEST_F(BatchSpanProcessorTest, ShutdownGivesUpAfterTheGrace) {
  Start({.max_queue_spans = 100, .max_export_spans = 1, .export_interval = kNever});
  exporter_->Hold(true);
  Submit(20);
  ASSERT_TRUE(exporter_->WaitForCalls(1, kWait));
  exporter_->SetDelay(absl::Milliseconds(40));
  exporter_->Hold(false);
  const auto start = std::chrono::steady_clock::now();
  processor_->Shutdown(absl::Milliseconds(100));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
  EXPECT_LT(processor_->spans_exported(), 20u);
  EXPECT_GT(processor_->spans_exported(), 0u);
  EXPECT_EQ(processor_->spans_exported() + processor_->spans_dropped(), 20u);
}

// Verifies that spans submitted from many threads at once are each exported or counted.
TEST_F(BatchSpanProcessorTest, ConcurrentSubmitsAreAllAccountedFor) {
  Start({.max_queue_spans = 256, .max_export_spans = 64, .export_interval = absl::Milliseconds(5)});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] { Submit(1000, absl::StrCat("t", t, "-")); });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  processor_->Shutdown(kWait);
  EXPECT_EQ(processor_->spans_exported() + processor_->spans_dropped(), 4000u);
  size_t received = 0;
  for (size_t size : exporter_->sizes()) {
    EXPECT_LE(size, 64u);
    received += size;
  }
  EXPECT_EQ(received, processor_->spans_exported());
}

// Verifies the Prometheus text: HELP and TYPE lines, each drop reason, and the queue gauge.
TEST_F(BatchSpanProcessorTest, AppendsMetrics) {
  Start({.max_queue_spans = 3, .max_export_spans = 10, .export_interval = kNever});
  exporter_->SetResult(absl::UnavailableError("collector down"));
  Submit(5);  // 3 queued (never a full batch of 10), 2 dropped
  std::string before;
  processor_->AppendMetrics(&before);
  EXPECT_THAT(before, HasSubstr("sluice_tracing_spans_dropped_total{reason=\"queue_full\"} 2\n"));
  EXPECT_THAT(before, HasSubstr("sluice_tracing_queue_spans 3\n"));

  processor_->Shutdown(kWait);  // the 3 fail
  std::string text;
  processor_->AppendMetrics(&text);
  EXPECT_EQ(text,
            "# HELP sluice_tracing_spans_dropped_total Spans not exported: the export queue was "
            "full (queue_full), or their export failed (export_failed)\n"
            "# TYPE sluice_tracing_spans_dropped_total counter\n"
            "sluice_tracing_spans_dropped_total{reason=\"queue_full\"} 2\n"
            "sluice_tracing_spans_dropped_total{reason=\"export_failed\"} 3\n"
            "# HELP sluice_tracing_spans_exported_total Spans the collector accepted\n"
            "# TYPE sluice_tracing_spans_exported_total counter\n"
            "sluice_tracing_spans_exported_total 0\n"
            "# HELP sluice_tracing_exports_failed_total Exports to the collector that failed "
            "(their spans are dropped, not retried)\n"
            "# TYPE sluice_tracing_exports_failed_total counter\n"
            "sluice_tracing_exports_failed_total 1\n"
            "# HELP sluice_tracing_queue_spans Spans waiting for export\n"
            "# TYPE sluice_tracing_queue_spans gauge\n"
            "sluice_tracing_queue_spans 0\n");
}

}  // namespace
}  // namespace sluice
