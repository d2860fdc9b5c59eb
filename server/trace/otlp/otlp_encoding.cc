#include "server/trace/otlp/otlp_encoding.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>

namespace sluice {
namespace {

namespace common = ::opentelemetry::proto::common::v1;
namespace trace = ::opentelemetry::proto::trace::v1;

void AddString(google::protobuf::RepeatedPtrField<common::KeyValue>* attributes,
               absl::string_view key, absl::string_view value) {
  common::KeyValue* attribute = attributes->Add();
  attribute->set_key(std::string(key));
  attribute->mutable_value()->set_string_value(std::string(value));
}

void SetValue(const SpanAttribute& attribute, common::AnyValue* out) {
  std::visit(
      [out](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out->set_string_value(value);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out->set_int_value(value);
        } else if constexpr (std::is_same_v<T, bool>) {
          out->set_bool_value(value);
        } else {
          static_assert(std::is_same_v<T, double>, "an attribute type without an AnyValue");
          out->set_double_value(value);
        }
      },
      attribute.value);
}

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), id.size());
}

}  // namespace

void EncodeSpan(const SpanData& span, trace::Span* out) {
  out->set_trace_id(Bytes(span.trace_id));
  out->set_span_id(Bytes(span.span_id));
  if (IsValid(span.parent_span_id)) {
    out->set_parent_span_id(Bytes(span.parent_span_id));
  }
  out->set_trace_state(span.trace_state);
  out->set_flags(uint32_t{span.trace_flags} | kOtlpFlagHasIsRemote |
                 (span.remote_parent ? kOtlpFlagIsRemote : 0u));
  out->set_name(std::string(span.name));
  // SpanKind's values are OTLP's (span.h).
  out->set_kind(static_cast<trace::Span::SpanKind>(span.kind));
  // Times before the epoch cannot be sent (the fields are unsigned): they become 0, "unknown".
  out->set_start_time_unix_nano(static_cast<uint64_t>(std::max<int64_t>(span.start_unix_nanos, 0)));
  out->set_end_time_unix_nano(static_cast<uint64_t>(std::max<int64_t>(span.end_unix_nanos, 0)));
  out->mutable_attributes()->Reserve(static_cast<int>(span.attributes.size()));
  for (const SpanAttribute& attribute : span.attributes) {
    common::KeyValue* kv = out->add_attributes();
    kv->set_key(std::string(attribute.key));
    SetValue(attribute, kv->mutable_value());
  }
  out->set_dropped_attributes_count(span.dropped_attributes);
  if (span.status != SpanStatus::kUnset) {
    trace::Status* status = out->mutable_status();
    // SpanStatus's values are OTLP's (span.h).
    status->set_code(static_cast<trace::Status::StatusCode>(span.status));
    status->set_message(span.status_message);
  }
}

opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest EncodeExportRequest(
    absl::Span<const SpanData> spans, const OtlpResource& resource) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  trace::ResourceSpans* resource_spans = request.add_resource_spans();
  resource_spans->set_schema_url(std::string(kOtlpSchemaUrl));
  auto* attributes = resource_spans->mutable_resource()->mutable_attributes();
  AddString(attributes, "service.name", resource.service_name);
  if (!resource.service_namespace.empty()) {
    AddString(attributes, "service.namespace", resource.service_namespace);
  }
  AddString(attributes, "service.instance.id", resource.service_instance_id);
  if (!resource.service_version.empty()) {
    AddString(attributes, "service.version", resource.service_version);
  }
  AddString(attributes, "telemetry.sdk.name", kOtlpScopeName);
  AddString(attributes, "telemetry.sdk.language", "cpp");

  trace::ScopeSpans* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name(std::string(kOtlpScopeName));
  scope_spans->mutable_spans()->Reserve(static_cast<int>(spans.size()));
  for (const SpanData& span : spans) {
    EncodeSpan(span, scope_spans->add_spans());
  }
  return request;
}

}  // namespace sluice
