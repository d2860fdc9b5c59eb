// The caller's trace context, as a gateway sends it: W3C Trace Context (`traceparent`,
// `tracestate`) or Zipkin's B3 (single `b3` header, or the `x-b3-*` headers), read from gRPC
// metadata or HTTP headers. A decision's span continues the caller's trace as a child of the
// caller's span (tracer.h).
//
// Pure functions of their input; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "server/trace/span.h"

namespace sluice {

struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};
  // The caller sampled its span (W3C flag bit 0; B3 sampled=1 or debug). Meaningless when
  // sampling_deferred.
  bool sampled = false;
  // The caller sent ids but no sampling decision (B3 without a sampling state): the receiver
  // decides, and the sampler applies its ratio to the caller's trace id (sampler.h). Never set
  // for W3C, whose flags always carry the decision.
  bool sampling_deferred = false;
  // W3C tracestate as received (empty for B3), kept only when valid and at most 512 bytes.
  std::string trace_state;
};

// Looks up a header or metadata entry by its lower-case name; nullopt when absent.
using HeaderLookup = absl::FunctionRef<std::optional<absl::string_view>(absl::string_view)>;

// The caller's context: `traceparent` (with `tracestate`) when it is valid, else B3 (the single
// `b3` header, then `x-b3-traceid`/`x-b3-spanid`/`x-b3-sampled`/`x-b3-flags`); nullopt when
// neither is present and valid. A malformed header is ignored as if absent (the decision then
// starts a trace of its own), never an error for the call; so is a `b3` header that carries only
// a sampling state ("0", "1", "d"), which names no trace to continue. An invalid `tracestate`
// (syntax, more than 32 members, more than 512 bytes) is dropped and the context kept. Ids are
// lower-case hex in every format; a 64-bit B3 trace id is left-padded with zeros to 128 bits.
std::optional<TraceContext> ExtractTraceContext(HeaderLookup headers);

}  // namespace sluice
