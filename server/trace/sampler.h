// Which decisions are traced: parent-based with a ratio for roots, as OpenTelemetry's
// ParentBased(TraceIDRatioBased(ratio)) (envoyproxy/ratelimit's sampler). A call whose caller
// sent a trace context follows the caller's sampled flag; a call without one, or whose caller
// left the decision to the receiver (B3 without a sampling state), is sampled when its trace id
// falls under `ratio` (the same ids sample the same way in every replica and every
// OpenTelemetry SDK).
//
// Pure; thread-safe.
#pragma once

#include <optional>

#include "server/trace/span.h"
#include "server/trace/trace_context.h"

namespace sluice {

// Whether a trace whose id is `trace_id` is sampled at `ratio` (<= 0 or NaN: never; >= 1: always):
// the trace id's last 8 bytes, read big-endian and shifted right by one, are below
// ratio * 2^63.
bool SampledByRatio(const TraceId& trace_id, double ratio);

// Parent-based: the parent's sampled flag when there is a parent that made a decision, else
// (no parent, or a parent whose sampling_deferred is set) SampledByRatio of `trace_id`, which
// for a deferring parent is the parent's trace id, the one the call continues.
bool ShouldSample(const std::optional<TraceContext>& parent, const TraceId& trace_id,
                  double ratio);

}  // namespace sluice
