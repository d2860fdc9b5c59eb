// Sluice's spans as OTLP's messages: one ExportTraceServiceRequest per exported batch, carrying
// one ResourceSpans (the service instance's resource attributes) with one ScopeSpans ("sluice").
// This is the readable reference of what is sent: the exporters write the same bytes directly
// (otlp_wire.h), and the tests hold the two to each other.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "server/trace/span.h"

namespace sluice {

// Who made the spans: OpenTelemetry's service.* resource attributes.
struct OtlpResource {
  std::string service_name;
  // Sent only when non-empty.
  std::string service_namespace;
  std::string service_instance_id;
  // Sent only when non-empty.
  std::string service_version;
};

// The resource attributes' schema (the one envoyproxy/ratelimit's exporter declares).
inline constexpr absl::string_view kOtlpSchemaUrl = "https://opentelemetry.io/schemas/1.7.0";
// The instrumentation scope's name, and telemetry.sdk.name.
inline constexpr absl::string_view kOtlpScopeName = "sluice";

// Span.flags bits beside the W3C trace flags (bits 0-7): bit 9 is meaningful, and bit 9 set
// means the parent span is another process's.
inline constexpr uint32_t kOtlpFlagHasIsRemote = 0x100;
inline constexpr uint32_t kOtlpFlagIsRemote = 0x200;

// The request exporting `spans` (in their order) for `resource`. Empty `spans` give a request
// whose ScopeSpans holds no span.
opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest EncodeExportRequest(
    absl::Span<const SpanData> spans, const OtlpResource& resource);

// One span's wire form, as EncodeExportRequest writes it into the request.
void EncodeSpan(const SpanData& span, opentelemetry::proto::trace::v1::Span* out);

}  // namespace sluice
