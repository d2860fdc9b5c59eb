#include "server/trace/tracer.h"

#include <utility>

#include "server/trace/sampler.h"

namespace sluice {
namespace {

// Room for the attributes a span of Sluice's usually gets (a call's: the transport's and the
// decision's; a child's: a Redis call's), made once rather than grown.
constexpr size_t kCallAttributes = 12;
constexpr size_t kChildAttributes = 6;

}  // namespace

Span& Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    End();
    active_ = std::move(other.active_);
  }
  return *this;
}

TraceParent Span::parent() const {
  if (active_ == nullptr) {
    return {};
  }
  return TraceParent{active_->tracer, active_->data.trace_id, active_->data.span_id};
}

void Span::Submit() {
  active_->data.end_unix_nanos = active_->tracer->NowMicros() * 1000;
  active_->tracer->Submit(std::move(active_->data));
  active_.reset();
}

Tracer::Tracer(SpanSink& sink, const Clock& clock, IdGenerator& ids, TracerOptions options)
    : sink_(sink), clock_(clock), ids_(ids), options_(options) {}

Span Tracer::StartCall(absl::string_view name, const std::optional<TraceContext>& caller) {
  const bool continues = caller.has_value();
  const TraceId trace_id = continues ? caller->trace_id : ids_.NewTraceId();
  if (!ShouldSample(caller, trace_id, options_.sampling_ratio)) {
    return Span();
  }
  auto active = std::make_unique<Span::Active>();
  active->tracer = this;
  SpanData* data = &active->data;
  data->trace_id = trace_id;
  data->span_id = ids_.NewSpanId();
  if (continues) {
    data->parent_span_id = caller->span_id;
    data->trace_state = caller->trace_state;
    data->remote_parent = true;
  }
  data->name = name;
  data->kind = SpanKind::kServer;
  data->attributes.reserve(kCallAttributes);
  data->start_unix_nanos = clock_.NowMicros() * 1000;
  return Span(std::move(active));
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
  auto active = std::make_unique<Span::Active>();
  active->tracer = parent.tracer;
  SpanData* data = &active->data;
  data->trace_id = parent.trace_id;
  data->span_id = parent.tracer->ids_.NewSpanId();
  data->parent_span_id = parent.span_id;
  data->name = name;
  data->kind = kind;
  data->attributes.reserve(kChildAttributes);
  data->start_unix_nanos = start_unix_micros * 1000;
  return Span(std::move(active));
}

}  // namespace sluice
