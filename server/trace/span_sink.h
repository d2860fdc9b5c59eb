// Where ended spans go: the batch exporter in production (server/trace/otlp/), a recording
// sink in tests. Sluice's decision path hands spans over and moves on: Submit never blocks and
// never fails the caller; a sink that cannot keep up drops and counts.
//
// Thread-safety: implementations are safe for concurrent Submit from any thread.
#pragma once

#include <string>

#include "server/trace/span.h"

namespace sluice {

class SpanSink {
 public:
  virtual ~SpanSink() = default;

  // Takes an ended span. Never blocks (the call may come from a gRPC or Redis I/O thread).
  virtual void Submit(SpanData span) = 0;

  // Appends the sink's own metrics (spans exported, dropped), in the Prometheus text format.
  // Default: none.
  virtual void AppendMetrics(std::string* /*out*/) const {}
};

}  // namespace sluice
