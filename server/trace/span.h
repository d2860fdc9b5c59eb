// One finished span as Sluice exports it: the OTLP span's fields Sluice fills (see
// server/trace/otlp/ for the wire form), with bounded attribute sizes. Spans are made by
// Tracer (tracer.h) and handed, once ended, to a SpanSink (span_sink.h).
//
// Plain values; not synchronized.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"

namespace sluice {

// W3C trace context ids, in wire (big-endian) byte order. All zeros is invalid.
using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

inline bool IsValid(const TraceId& id) { return id != TraceId{}; }
inline bool IsValid(const SpanId& id) { return id != SpanId{}; }
// Lower-case hex, as in a traceparent header.
std::string ToHex(const TraceId& id);
std::string ToHex(const SpanId& id);

// OTLP's Span.SpanKind values.
enum class SpanKind : uint8_t {
  kInternal = 1,
  kServer = 2,
  kClient = 3,
};

// OTLP's Status.StatusCode values.
enum class SpanStatus : uint8_t {
  kUnset = 0,
  kOk = 1,
  kError = 2,
};

// The longest attribute value and status message kept, in bytes; longer ones are cut (at a
// UTF-8 character boundary) and end in "...".
inline constexpr size_t kMaxSpanValueBytes = 256;
// The most attributes one span keeps; later ones are counted in dropped_attributes.
inline constexpr size_t kMaxSpanAttributes = 32;

struct SpanAttribute {
  using Value = std::variant<std::string, int64_t, bool, double>;

  // A literal (static storage): keys are the instrumentation's constants, kept as views so that
  // a span's attributes cost no allocation for their names.
  absl::string_view key;
  Value value;
};

struct SpanData {
  TraceId trace_id{};
  SpanId span_id{};
  // All zeros: a root span.
  SpanId parent_span_id{};
  // The caller's W3C tracestate, on the span that continues its trace (children leave it out).
  std::string trace_state;
  // W3C trace flags (bit 0: sampled; every exported span is).
  uint8_t trace_flags = 1;
  // The parent is another process's span (the caller's): OTLP's flags say so.
  bool remote_parent = false;
  // A literal (static storage), as attribute keys are.
  absl::string_view name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  std::vector<SpanAttribute> attributes;
  uint32_t dropped_attributes = 0;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;

  // Adds an attribute, its string value cut to kMaxSpanValueBytes; past kMaxSpanAttributes it is
  // counted in dropped_attributes instead. REQUIRES: `key` has static storage (a literal).
  void Add(absl::string_view key, absl::string_view value);
  void Add(absl::string_view key, const char* value) { Add(key, absl::string_view(value)); }
  void Add(absl::string_view key, int64_t value);
  void Add(absl::string_view key, bool value);
  void Add(absl::string_view key, double value);
  // The value of attribute `key`, or nullptr (for tests and exporters).
  const SpanAttribute* Find(absl::string_view key) const;
  // Sets the status to kError with `message` (cut like an attribute).
  void SetError(absl::string_view message);

 private:
  // Appends the attribute, or counts it dropped past kMaxSpanAttributes.
  void AddValue(absl::string_view key, SpanAttribute::Value value);
};

// `text` cut to at most `max_bytes` at a UTF-8 character boundary, ending in "..." when cut.
std::string Truncated(absl::string_view text, size_t max_bytes);

}  // namespace sluice
