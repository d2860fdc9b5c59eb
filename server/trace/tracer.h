// Sluice's spans: a decision's span, made a child of the caller's when the call carries a trace
// context, and its children (a Redis call to one node, the over-limit cache answering, the local
// fallback deciding). Which calls are traced is the sampler's choice (sampler.h); an untraced
// call gets an inactive Span, and every operation on one is a test of a null pointer, so the
// decision path pays nothing else for tracing it does not do.
//
// Spans are submitted to the SpanSink as each ends; a child may end after its parent (a Redis
// reply that comes after the decision gave up on it).
//
// Thread-safety: Tracer is safe for concurrent use. A Span is one thread's at a time; a
// TraceParent is a plain value that any thread may use to start children.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "server/common/clock.h"
#include "server/trace/id_generator.h"
#include "server/trace/span.h"
#include "server/trace/span_sink.h"
#include "server/trace/trace_context.h"

namespace sluice {

class Tracer;

// What a child span needs of its parent: a plain value, empty (no tracer) when the parent is
// not traced. Copy it anywhere; the Tracer must outlive every use.
struct TraceParent {
  Tracer* tracer = nullptr;
  TraceId trace_id{};
  SpanId span_id{};

  bool active() const { return tracer != nullptr; }
};

// A span being recorded, or an inactive one (default-constructed, or not sampled) on which
// everything does nothing. Ends, and is submitted, on End or when destroyed. Movable.
class Span {
 public:
  Span() = default;
  Span(Span&&) = default;
  Span& operator=(Span&& other) noexcept;
  ~Span() {
    if (active_ != nullptr) {
      Submit();
    }
  }

  bool active() const { return active_ != nullptr; }
  // The context for this span's children; inactive when this span is.
  TraceParent parent() const;
  // The tracer that made this span. REQUIRES: active().
  Tracer& tracer() const { return *active_->tracer; }

  // Attributes and status, on an active span (bounded: see SpanData::Add).
  template <typename T>
  void Add(absl::string_view key, T value) {
    if (active_ != nullptr) {
      active_->data.Add(key, value);
    }
  }
  void SetError(absl::string_view message) {
    if (active_ != nullptr) {
      active_->data.SetError(message);
    }
  }
  // The span's data so far; REQUIRES: active().
  SpanData& data() { return active_->data; }

  // Stamps the end time and submits the span; later calls do nothing.
  void End() {
    if (active_ != nullptr) {
      Submit();
    }
  }

 private:
  friend class Tracer;
  // A span being recorded and the tracer it goes back to: one allocation, and a Span the size
  // of a pointer (it sits in every call object, traced or not).
  struct Active {
    Tracer* tracer;
    SpanData data;
  };

  explicit Span(std::unique_ptr<Active> active) : active_(std::move(active)) {}
  // End's work. REQUIRES: active_ != nullptr.
  void Submit();

  std::unique_ptr<Active> active_;
};

struct TracerOptions {
  // Share of calls traced when the caller did not decide: no caller context, or a B3 one that
  // defers (parent-based: a caller's sampled flag decides for its calls). 0 to 1.
  double sampling_ratio = 1.0;
  // Descriptor entries' values on the decision span (they can be user identifiers).
  bool descriptor_values = false;
};

class Tracer {
 public:
  // `sink`, `clock` (span times: Clock::NowMicros) and `ids` must outlive the tracer.
  Tracer(SpanSink& sink, const Clock& clock, IdGenerator& ids, TracerOptions options);

  // Starts a server-side span for an incoming call: a child of `caller` when given (same trace;
  // sampled as the caller says, or at the ratio when it defers), else the root of a new trace
  // sampled at the ratio. Inactive when not sampled.
  // REQUIRES: `name` has static storage (a literal), as every span name and attribute key.
  Span StartCall(absl::string_view name, const std::optional<TraceContext>& caller);
  // Starts a child of `parent`, now; inactive when `parent` is.
  static Span StartChild(const TraceParent& parent, absl::string_view name, SpanKind kind);
  // The same with a start time already taken (Clock::NowMicros of the tracer's clock), for work
  // whose start is only known to have been traced once it ends.
  static Span StartChildAt(const TraceParent& parent, absl::string_view name, SpanKind kind,
                           int64_t start_unix_micros);

  const TracerOptions& options() const { return options_; }
  // The tracer's clock, microseconds since the Unix epoch.
  int64_t NowMicros() const { return clock_.NowMicros(); }
  // The sink's metrics (SpanSink::AppendMetrics).
  void AppendMetrics(std::string* out) const { sink_.AppendMetrics(out); }

 private:
  friend class Span;
  void Submit(SpanData data) { sink_.Submit(std::move(data)); }

  SpanSink& sink_;
  const Clock& clock_;
  IdGenerator& ids_;
  const TracerOptions options_;
};

}  // namespace sluice
