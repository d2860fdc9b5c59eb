// Where rate-limit state lives and where decisions are executed. One interface, several
// implementations: MemoryBackend (in process; also the local fallback), RedisBackend
// (standalone and cluster). Implementations are safe for concurrent use from many threads.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"
#include "server/trace/tracer.h"

namespace sluice {

// One limit to check and consume.
struct LimitCheck {
  // Storage key (see storage_key.h); identifies the state this check reads and writes.
  absl::string_view key;
  LimitParams params;
  uint64_t hits = 1;
  // Checks of one batch with the same group are decided together, all-or-nothing: if any of
  // them denies, none of them consumes (the rules of one descriptor form a group). Decisions
  // are still reported per check; the caller treats the group as denied if any check is.
  uint32_t group = 0;
  // A refund (Envoy's is_negative_hits): gives back up to `hits` instead of taking them
  // (sluice::Refund). Never denied; in a group it is applied whatever the group's outcome and
  // never denies the group.
  bool refund = false;
};

// Receives the outcome of one Evaluate call. On OK, `decisions` has one entry per check, in
// order. On error (kUnavailable, kDeadlineExceeded, ...), `decisions` is empty and the caller
// applies its failure policy. The span is valid only during the call.
using EvaluateCallback = absl::AnyInvocable<void(absl::Status, absl::Span<const Decision>) &&>;

class Backend {
 public:
  virtual ~Backend() = default;

  // Decides every check in `checks`. Keys, params and hits are copied or consumed before
  // Evaluate returns, so `checks` need only live for the call. `done` runs exactly once, either
  // inline on the caller's stack (memory backend) or later on a backend thread (Redis); it must
  // not block.
  // `trace`: the decision's span, under which a backend that calls out (Redis) records a span
  // per call; inactive when the decision is not traced.
  virtual void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                        EvaluateCallback done) = 0;
  // The same, untraced.
  void Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) {
    Evaluate(checks, TraceParent{}, std::move(done));
  }

  // A short name for logs and /healthz: "memory", "redis", "redis_cluster".
  virtual absl::string_view Name() const = 0;

  // Whether decisions can be made right now (e.g. Redis connections are up); /readyz reports
  // it. Cheap, lock-free and safe from any thread.
  virtual bool Ready() const { return true; }

  // Appends the backend's own metrics, in the Prometheus text format, to *out (served after
  // Metrics' at /metrics). Default: none.
  virtual void AppendMetrics(std::string* /*out*/) const {}
};

}  // namespace sluice
