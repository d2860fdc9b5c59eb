#include "server/trace/otlp/otlp_wire.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <variant>
#include <vector>

namespace sluice {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

constexpr uint32_t Tag(uint32_t field, uint32_t wire_type) { return (field << 3) | wire_type; }

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

// Writes into a buffer already sized to the request's exact length (computed from the same
// sizes), so no write checks capacity.
struct Writer {
  char* at;
};

void PutVarint(uint64_t value, Writer* out) {
  while (value >= 0x80) {
    *out->at++ = static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  *out->at++ = static_cast<char>(value);
}

void PutFixed32(uint32_t value, Writer* out) {
  for (int i = 0; i < 4; ++i) {
    *out->at++ = static_cast<char>(value >> (8 * i));
  }
}

void PutFixed64(uint64_t value, Writer* out) {
  for (int i = 0; i < 8; ++i) {
    *out->at++ = static_cast<char>(value >> (8 * i));
  }
}

// A length-delimited field of `length` bytes, tag and length included.
size_t FieldSize(uint32_t field, size_t length) {
  return VarintSize(Tag(field, kLengthDelimited)) + VarintSize(length) + length;
}

void PutHeader(uint32_t field, size_t length, Writer* out) {
  PutVarint(Tag(field, kLengthDelimited), out);
  PutVarint(length, out);
}

void PutBytes(uint32_t field, absl::string_view bytes, Writer* out) {
  PutHeader(field, bytes.size(), out);
  std::memcpy(out->at, bytes.data(), bytes.size());
  out->at += bytes.size();
}

// proto3 leaves a string at its default (empty) off the wire.
size_t StringSize(uint32_t field, absl::string_view value) {
  return value.empty() ? 0 : FieldSize(field, value.size());
}

void PutString(uint32_t field, absl::string_view value, Writer* out) {
  if (!value.empty()) {
    PutBytes(field, value, out);
  }
}

template <size_t N>
absl::string_view Bytes(const std::array<uint8_t, N>& id) {
  return absl::string_view(reinterpret_cast<const char*>(id.data()), N);
}

// AnyValue (common.proto): string_value 1, bool_value 2, int_value 3, double_value 4. A oneof
// member is on the wire even at its default.
size_t AnyValueSize(const SpanAttribute::Value& value) {
  return std::visit(
      [](const auto& v) -> size_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return FieldSize(1, v.size());
        } else if constexpr (std::is_same_v<T, bool>) {
          return 2;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return 1 + VarintSize(static_cast<uint64_t>(v));
        } else {
          return 1 + 8;
        }
      },
      value);
}

void PutAnyValue(const SpanAttribute::Value& value, Writer* out) {
  std::visit(
      [out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          PutBytes(1, v, out);
        } else if constexpr (std::is_same_v<T, bool>) {
          PutVarint(Tag(2, kVarint), out);
          *out->at++ = v ? 1 : 0;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          PutVarint(Tag(3, kVarint), out);
          PutVarint(static_cast<uint64_t>(v), out);
        } else {
          PutVarint(Tag(4, kFixed64), out);
          uint64_t bits;
          std::memcpy(&bits, &v, 8);
          PutFixed64(bits, out);
        }
      },
      value);
}

// KeyValue: key 1, value 2.
size_t KeyValueSize(absl::string_view key, const SpanAttribute::Value& value) {
  return StringSize(1, key) + FieldSize(2, AnyValueSize(value));
}

void PutKeyValue(uint32_t field, absl::string_view key, const SpanAttribute::Value& value,
                 Writer* out) {
  PutHeader(field, KeyValueSize(key, value), out);
  PutString(1, key, out);
  PutHeader(2, AnyValueSize(value), out);
  PutAnyValue(value, out);
}

uint64_t Nanos(int64_t unix_nanos) { return static_cast<uint64_t>(std::max<int64_t>(unix_nanos, 0)); }

// Status: message 2, code 3; only on a span whose status is set.
size_t StatusSize(const SpanData& span) {
  return StringSize(2, span.status_message) + 1 + VarintSize(static_cast<uint64_t>(span.status));
}

uint32_t Flags(const SpanData& span) {
  return uint32_t{span.trace_flags} | kOtlpFlagHasIsRemote |
         (span.remote_parent ? kOtlpFlagIsRemote : 0u);
}

// Span (trace.proto), fields in the order protobuf serializes them: by field number.
size_t SpanSize(const SpanData& span) {
  size_t size = FieldSize(1, span.trace_id.size()) + FieldSize(2, span.span_id.size()) +
                StringSize(3, span.trace_state) +
                (IsValid(span.parent_span_id) ? FieldSize(4, span.parent_span_id.size()) : 0) +
                StringSize(5, span.name) +
                (span.kind == SpanKind{} ? 0 : 1 + VarintSize(static_cast<uint64_t>(span.kind))) +
                (span.start_unix_nanos > 0 ? 1 + 8 : 0) + (span.end_unix_nanos > 0 ? 1 + 8 : 0);
  for (const SpanAttribute& attribute : span.attributes) {
    size += FieldSize(9, KeyValueSize(attribute.key, attribute.value));
  }
  if (span.dropped_attributes > 0) {
    size += 1 + VarintSize(span.dropped_attributes);
  }
  if (span.status != SpanStatus::kUnset) {
    size += FieldSize(15, StatusSize(span));
  }
  return size + 2 + 4;  // flags: a two-byte tag (field 16), fixed32; never 0 (has-is-remote)
}

void PutSpan(const SpanData& span, size_t size, Writer* out) {
  PutHeader(2, size, out);  // ScopeSpans.spans
  PutBytes(1, Bytes(span.trace_id), out);
  PutBytes(2, Bytes(span.span_id), out);
  PutString(3, span.trace_state, out);
  if (IsValid(span.parent_span_id)) {
    PutBytes(4, Bytes(span.parent_span_id), out);
  }
  PutString(5, span.name, out);
  if (span.kind != SpanKind{}) {
    PutVarint(Tag(6, kVarint), out);
    PutVarint(static_cast<uint64_t>(span.kind), out);
  }
  if (span.start_unix_nanos > 0) {
    PutVarint(Tag(7, kFixed64), out);
    PutFixed64(Nanos(span.start_unix_nanos), out);
  }
  if (span.end_unix_nanos > 0) {
    PutVarint(Tag(8, kFixed64), out);
    PutFixed64(Nanos(span.end_unix_nanos), out);
  }
  for (const SpanAttribute& attribute : span.attributes) {
    PutKeyValue(9, attribute.key, attribute.value, out);
  }
  if (span.dropped_attributes > 0) {
    PutVarint(Tag(10, kVarint), out);
    PutVarint(span.dropped_attributes, out);
  }
  if (span.status != SpanStatus::kUnset) {
    PutHeader(15, StatusSize(span), out);
    PutString(2, span.status_message, out);
    PutVarint(Tag(3, kVarint), out);
    PutVarint(static_cast<uint64_t>(span.status), out);
  }
  PutVarint(Tag(16, kFixed32), out);
  PutFixed32(Flags(span), out);
}

// The resource's attributes, as EncodeExportRequest lists them.
struct ResourceAttribute {
  absl::string_view key;
  SpanAttribute::Value value;
};

std::vector<ResourceAttribute> ResourceAttributes(const OtlpResource& resource) {
  std::vector<ResourceAttribute> out;
  out.push_back({"service.name", resource.service_name});
  if (!resource.service_namespace.empty()) {
    out.push_back({"service.namespace", resource.service_namespace});
  }
  out.push_back({"service.instance.id", resource.service_instance_id});
  if (!resource.service_version.empty()) {
    out.push_back({"service.version", resource.service_version});
  }
  out.push_back({"telemetry.sdk.name", std::string(kOtlpScopeName)});
  out.push_back({"telemetry.sdk.language", std::string("cpp")});
  return out;
}

}  // namespace

void AppendExportRequest(absl::Span<const SpanData> spans, const OtlpResource& resource,
                         std::string* buffer) {
  const std::vector<ResourceAttribute> attributes = ResourceAttributes(resource);
  size_t resource_size = 0;
  for (const ResourceAttribute& attribute : attributes) {
    resource_size += FieldSize(1, KeyValueSize(attribute.key, attribute.value));
  }
  const size_t scope_size = StringSize(1, kOtlpScopeName);
  std::vector<size_t> span_sizes;
  span_sizes.reserve(spans.size());
  size_t scope_spans_size = FieldSize(1, scope_size);
  for (const SpanData& span : spans) {
    span_sizes.push_back(SpanSize(span));
    scope_spans_size += FieldSize(2, span_sizes.back());
  }
  const size_t resource_spans_size = FieldSize(1, resource_size) +
                                     FieldSize(2, scope_spans_size) +
                                     StringSize(3, kOtlpSchemaUrl);
  const size_t start = buffer->size();
  const size_t total = FieldSize(1, resource_spans_size);
  buffer->resize(start + total);
  Writer writer{buffer->data() + start};
  Writer* out = &writer;

  PutHeader(1, resource_spans_size, out);  // ExportTraceServiceRequest.resource_spans
  PutHeader(1, resource_size, out);        // ResourceSpans.resource
  for (const ResourceAttribute& attribute : attributes) {
    PutKeyValue(1, attribute.key, attribute.value, out);  // Resource.attributes
  }
  PutHeader(2, scope_spans_size, out);  // ResourceSpans.scope_spans
  PutHeader(1, scope_size, out);        // ScopeSpans.scope
  PutString(1, kOtlpScopeName, out);    // InstrumentationScope.name
  for (size_t i = 0; i < spans.size(); ++i) {
    PutSpan(spans[i], span_sizes[i], out);
  }
  PutString(3, kOtlpSchemaUrl, out);  // ResourceSpans.schema_url
  // The sizes and the writes are one layout: a difference would be a bug here, not in the data.
  assert(writer.at == buffer->data() + start + total);
}

}  // namespace sluice
