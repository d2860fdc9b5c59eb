// Where the batch span processor (batch_span_processor.h) sends its batches: an OTLP collector
// over gRPC (otlp_grpc_exporter.h) or HTTP (otlp_http_exporter.h), or a fake in tests.
//
// Thread-safety: Export blocks, and is called from one thread only (the processor's); it is
// never called concurrently with itself. Describe is safe from any thread.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/trace/span.h"

namespace sluice {

class SpanExporter {
 public:
  virtual ~SpanExporter() = default;

  // Sends `spans` and waits for the answer, within the exporter's own timeout. OK when the
  // receiver took every span; otherwise the most specific code (kUnavailable: no connection or
  // the receiver is overloaded; kDeadlineExceeded: no answer within the timeout) with a message
  // that names the receiver and what went wrong. The caller does not retry: the spans of a
  // failed export are dropped.
  virtual absl::Status Export(absl::Span<const SpanData> spans) = 0;

  // The receiver, for logs: "OTLP/gRPC to http://collector:4317".
  virtual std::string Describe() const = 0;
};

}  // namespace sluice
