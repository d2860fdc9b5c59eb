// The exporters' encoder: a batch of spans written straight into OTLP's protobuf wire form, with
// no message objects in between. A batch of hundreds of spans would otherwise be hundreds of
// messages and strings built and destroyed per export; here it is one buffer, sized once. The
// bytes are those EncodeExportRequest's message serializes to (otlp_encoding.h, the readable
// reference; otlp_encoding_test.cc checks the two agree field for field).
//
// Pure function of its inputs; thread-safe.
#pragma once

#include <string>

#include "absl/types/span.h"
#include "server/trace/otlp/otlp_encoding.h"
#include "server/trace/span.h"

namespace sluice {

// Appends the ExportTraceServiceRequest for `spans` (in order) and `resource` to `*out`.
void AppendExportRequest(absl::Span<const SpanData> spans, const OtlpResource& resource,
                         std::string* out);

}  // namespace sluice
