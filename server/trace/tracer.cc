#include "server/trace/tracer.h"

#include <utility>

#include "server/trace/sampler.h"

namespace sluice {

Span& Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    End();
    tracer_ = other.tracer_;
    data_ = std::move(other.data_);
  }
  return *this;
}

TraceParent Span::parent() const {
  if (data_ == nullptr) {
    return {};
  }
  return TraceParent{tracer_, data_->trace_id, data_->span_id};
}

void Span::Submit() {
  data_->end_unix_nanos = tracer_->NowMicros() * 1000;
  tracer_->Submit(std::move(*data_));
  data_.reset();
}

Tracer::Tracer(SpanSink& sink, const Clock& clock, IdGenerator& ids, TracerOptions options)
    : sink_(sink), clock_(clock), ids_(ids), options_(options) {}

Span Tracer::StartCall(absl::string_view name, const std::optional<TraceContext>& caller) {
  const bool continues = caller.has_value();
  const TraceId trace_id = continues ? caller->trace_id : ids_.NewTraceId();
  if (!ShouldSample(caller, trace_id, options_.sampling_ratio)) {
    return Span();
  }
  auto data = std::make_unique<SpanData>();
  data->trace_id = trace_id;
  data->span_id = ids_.NewSpanId();
  if (continues) {
    data->parent_span_id = caller->span_id;
    data->trace_state = caller->trace_state;
    data->remote_parent = true;
  }
  data->name = std::string(name);
  data->kind = SpanKind::kServer;
  data->start_unix_nanos = clock_.NowMicros() * 1000;
  return Span(this, std::move(data));
}

Span Tracer::StartChild(const TraceParent& parent, absl::string_view name, SpanKind kind) {
  if (!parent.active()) {
    return Span();
  }
  return StartChildAt(parent, name, kind, parent.tracer->NowMicros());
}

Span Tracer::StartChildAt(const TraceParent& parent, absl::string_view name, SpanKind kind,
                          int64_t start_unix_micros) {
  if (!parent.active()) {
    return Span();
  }
  auto data = std::make_unique<SpanData>();
  data->trace_id = parent.trace_id;
  data->span_id = parent.tracer->ids_.NewSpanId();
  data->parent_span_id = parent.span_id;
  data->name = std::string(name);
  data->kind = kind;
  data->start_unix_nanos = start_unix_micros * 1000;
  return Span(parent.tracer, std::move(data));
}

}  // namespace sluice
