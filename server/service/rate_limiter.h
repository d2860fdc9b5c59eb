// The decision path of one ShouldRateLimit call, independent of transport, as named steps:
// validate the request (request_validation.h), resolve it against the config snapshot in force
// into a plan of checks (resolve.h), decide what the rule alone decides (decide_by_rule.h), answer
// what the over-limit cache knows (over_limit_step.h), ask the backend for the rest in one batch,
// let the failure policy answer what it could not (failure_policy.h), and build the Envoy RLS v3
// response (respond.h), whose account the metrics count. A release of an in-flight limit first
// takes back what this replica's failure policy answered without the backend (unbacked_step.h).
// The gRPC service and the HTTP /json endpoint both call it. docs/internals.md walks one decision
// through it.
//
// Thread-safe: one RateLimiter serves every concurrent call; it holds no per-call state (the
// failure_mode local store, the over-limit cache and the unbacked acquisitions are shared by all
// calls and safe for concurrent use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/backend/backend.h"
#include "server/common/clock.h"
#include "server/config/config_store.h"
#include "server/config/failure_mode.h"
#include "server/service/failure_policy.h"
#include "server/service/metrics.h"
#include "server/service/over_limit_cache.h"
#include "server/service/over_limit_step.h"
#include "server/service/request_validation.h"
#include "server/service/resolve.h"
#include "server/service/respond.h"
#include "server/service/unbacked_acquisitions.h"
#include "server/service/unbacked_step.h"
#include "server/trace/tracer.h"

namespace sluice {

struct RateLimiterOptions {
  size_t max_descriptors = 64;
  size_t max_entries = 32;
  // Longest domain, descriptor key or descriptor value, in bytes.
  size_t max_key_bytes = 1024;
  // Prepended to every storage key (lets several deployments share one Redis).
  std::string key_prefix;
  // What answers a descriptor the backend could not decide in its budget, unless its domain
  // sets its own failure_mode.
  FailureMode failure_mode = FailureMode::kAllow;
  // failure_mode local: how many replicas share the backend; each admits on its own a rule's
  // limit and burst divided by this, rounded up (a rule's local_share overrides). REQUIRES: >= 1.
  uint32_t replicas_hint = 1;
  // failure_mode local: keys and heap bytes the in-process store keeps at most.
  size_t local_max_keys = 1000000;
  size_t local_max_bytes = size_t{1} << 30;

  // Keys and heap bytes the store of acquisitions of in-flight limits answered without the
  // backend keeps at most (UnbackedAcquisitions).
  size_t unbacked_max_keys = UnbackedAcquisitions::kDefaultMaxKeys;
  size_t unbacked_max_bytes = UnbackedAcquisitions::kDefaultMaxBytes;

  // What the response says beyond the decisions (near_limit ratio, shadow and quota modes,
  // dynamic metadata, rate-limit headers, retry-after): handed to Respond as it is.
  RespondOptions respond;
  // Whether a denied request's hits are charged, for the rules that do not say (`charge:`):
  // --default_charge. LimitParams::charge.
  Charge default_charge = Charge::kIfAdmitted;
  // The same for fixed-window rules: --default_charge_fixed_window (always under upstream's
  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT unset or false); unset: default_charge.
  std::optional<Charge> default_charge_fixed_window;
  // --refuse_refunds: domains whose refunds (is_negative_hits) are answered INVALID_ARGUMENT; "*"
  // refuses them in every domain. Empty: every refund is applied (as envoyproxy/ratelimit).
  std::vector<std::string> refuse_refunds;
  // --calendar_months: fixed-window month rules and overrides count calendar months, UTC
  // (LimitParams::calendar_months).
  bool calendar_months = false;
};

// How a RateLimiter of `options` resolves requests: whoever must resolve a request as a decision
// does (the admin API's inspect and reset) takes these.
ResolveOptions ResolveOptionsOf(const RateLimiterOptions& options);

class RateLimiter {
 public:
  using Request = envoy::service::ratelimit::v3::RateLimitRequest;
  using Response = envoy::service::ratelimit::v3::RateLimitResponse;
  using DoneCallback = absl::AnyInvocable<void(absl::Status) &&>;

  // `config`, `backend`, `clock` (time of the failure_mode local fallback), `metrics` and
  // `cache` (optional: null disables it) must outlive the RateLimiter.
  RateLimiter(const ConfigStore& config, Backend& backend, const Clock& clock, Metrics& metrics,
              RateLimiterOptions options, OverLimitCache* cache = nullptr);

  // Decides `request` into `*response` and then calls `done` exactly once: OK with the response
  // filled, kInvalidArgument with a message naming the offending field, or kUnavailable while
  // no configuration is loaded (--force_start_without_initial_config); response untouched.
  // `request` need only live until this returns; `response` must live until `done` runs.
  // `done` may run inline, on the caller's stack, or later on a backend thread.
  // `span` (optional; null or inactive: untraced): the call's span, which the decision annotates
  // (domain, descriptors, overall code, failure reason) and under which its steps record theirs
  // (the over-limit cache answering, each Redis call, the local fallback deciding); it must live
  // until `done` runs, and its owner ends it.
  void ShouldRateLimit(const Request& request, Response* response, DoneCallback done,
                       Span* span = nullptr);

  // Appends the metrics of the in-process stores it owns or uses, in the Prometheus text
  // format: the failure_mode local store (sluice_local_fallback_*, once it exists), the
  // over-limit cache (sluice_over_limit_cache_*, if any) and the unbacked acquisitions
  // (sluice_unbacked_acquisitions_*).
  void AppendMetrics(std::string* out) const;

 private:
  struct PendingCall;  // one call's state while the backend decides (rate_limiter.cc)

  // Hands the call's undecided checks to the backend; the call finishes when both the backend's
  // callback and this frame have let go of it (the backend reads the checks until Evaluate
  // returns, which may be after its callback ran on another thread).
  void Evaluate(std::unique_ptr<PendingCall> call);
  // One holder of `call` lets go of it; the last one finishes it with its stored status.
  void LetGo(PendingCall* call);
  // After the backend: the failure policy, the cache's lesson, the response and its metrics.
  void Finish(std::unique_ptr<PendingCall> call, absl::Status status);
  void Count(const ResponseAccount& account, const Response& response);
  // --request_all_or_nothing: gives back what `checks` (of plan, decided by the backend) took,
  // each to the window it was charged in (LimitCheck::at_us); fire and forget.
  void GiveBack(const RequestPlan& plan, const CheckDecisions& decisions,
                absl::Span<const uint32_t> checks);
  // On the call's span: why the backend failed, what answered, and the local fallback's span
  // (it decided from `start_us`, a time of the span's tracer).
  static void TraceFailure(const absl::Status& status, FailureMode policy, int64_t start_us,
                           const CheckDecisions& decisions, Span& span);

  const ConfigStore& config_;
  Backend& backend_;
  // Where the rule alone decides (DecideByRule): a fixed window's end, for a limit of 0.
  const Clock& clock_;
  Metrics& metrics_;
  const RequestLimits limits_;
  const ResolveOptions resolve_options_;
  const RespondOptions respond_options_;
  OverLimitStep over_limit_;
  FailurePolicy failure_policy_;
  UnbackedAcquisitions unbacked_;
  UnbackedStep unbacked_step_;
};

}  // namespace sluice
