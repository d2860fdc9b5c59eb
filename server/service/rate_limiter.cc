#include "server/service/rate_limiter.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/failure_reason.h"
#include "server/service/decide_by_rule.h"

namespace sluice {

ResolveOptions ResolveOptionsOf(const RateLimiterOptions& options) {
  ResolveOptions out;
  out.key_prefix = options.key_prefix;
  out.failure_mode = options.failure_mode;
  out.default_charge = options.default_charge;
  out.default_charge_fixed_window = options.default_charge_fixed_window;
  out.describe_request = options.respond.response_dynamic_metadata;
  out.calendar_months = options.calendar_months;
  for (const std::string& domain : options.refuse_refunds) {
    if (domain == "*") {
      out.refuse_all_refunds = true;
    } else {
      out.refuse_refunds_in.insert(domain);
    }
  }
  return out;
}

namespace {

MemoryBackendOptions LocalStoreOptions(const RateLimiterOptions& options) {
  MemoryBackendOptions out;
  out.max_keys = std::max<size_t>(1, options.local_max_keys);
  out.max_bytes = std::max<size_t>(1, options.local_max_bytes);
  out.metric_prefix = "sluice_local_fallback";
  return out;
}

// Marks `never` on the denials of checks their rule can never admit, decided by a backend because
// they were charged (RequestPlan::charges_never_admitted).
void MarkNeverAdmitted(const RequestPlan& plan, CheckDecisions& decisions) {
  for (size_t c = 0; c < plan.checks.size(); ++c) {
    Decision& d = decisions.decisions[c];
    if (decisions.by[c] != DecidedBy::kNobody && !d.allowed &&
        !CanEverAdmit(plan.checks[c].params, plan.checks[c].hits)) {
      d.never = true;
    }
  }
}

// The decision span's account of the request: its domain and descriptors (entry keys, and
// values only when the tracer is told to show them: they can be user identifiers).
void DescribeRequest(const RateLimiter::Request& request, Span& span) {
  span.Add("ratelimit.domain", request.domain());
  span.Add("ratelimit.descriptors", static_cast<int64_t>(request.descriptors_size()));
  if (request.hits_addend() != 0) {
    span.Add("ratelimit.hits_addend", static_cast<int64_t>(request.hits_addend()));
  }
  const bool values = span.tracer().options().descriptor_values;
  std::string entries;
  for (const auto& descriptor : request.descriptors()) {
    if (!entries.empty()) {
      entries.push_back(';');
    }
    bool first = true;
    for (const auto& entry : descriptor.entries()) {
      absl::StrAppend(&entries, first ? "" : ",", entry.key(), values ? "=" : "",
                      values ? entry.value() : "");
      first = false;
    }
    if (entries.size() > kMaxSpanValueBytes) {
      break;  // cut by Add anyway
    }
  }
  span.Add(values ? "ratelimit.descriptor_entries" : "ratelimit.descriptor_keys", entries);
}

size_t CountDecidedBy(const CheckDecisions& decisions, DecidedBy by) {
  return static_cast<size_t>(std::count(decisions.by.begin(), decisions.by.end(), by));
}

}  // namespace

// Everything a call needs after the backend answers.
struct RateLimiter::PendingCall {
  RequestPlan plan;
  CheckDecisions decisions;
  // With the over-limit cache: the checks sent to the backend, by index, when it answered some.
  std::vector<size_t> remote_index;
  // While the backend decides: the backend's callback and Evaluate's frame hold the call (see
  // LetGo); the backend's status, for Finish.
  std::atomic<int> holders{0};
  absl::Status status;
  Response* response = nullptr;
  DoneCallback done;
  Span* span = nullptr;  // the caller's, when traced
  // One allocation per call, served from malloc's per-thread cache: past 1008 bytes glibc takes
  // a large chunk and consolidates its fast bins on every call.
  static void CheckSize() { static_assert(sizeof(PendingCall) <= 1008, "see kInlinePlanChecks"); }
};

RateLimiter::RateLimiter(const ConfigStore& config, Backend& backend, const Clock& clock,
                         Metrics& metrics, RateLimiterOptions options, OverLimitCache* cache)
    : config_(config),
      backend_(backend),
      clock_(clock),
      metrics_(metrics),
      limits_{options.max_descriptors, options.max_entries, options.max_key_bytes},
      resolve_options_(ResolveOptionsOf(options)),
      respond_options_(options.respond),
      over_limit_(cache),
      failure_policy_(backend.Name(), clock, options.replicas_hint, LocalStoreOptions(options)),
      unbacked_(clock, std::max<size_t>(1, options.unbacked_max_keys),
                std::max<size_t>(1, options.unbacked_max_bytes)),
      unbacked_step_(unbacked_, failure_policy_) {}

void RateLimiter::AppendMetrics(std::string* out) const {
  failure_policy_.AppendMetrics(out);
  if (over_limit_.cache() != nullptr) {
    over_limit_.cache()->AppendMetrics(out);
  }
  unbacked_.AppendMetrics(out);
}

void RateLimiter::ShouldRateLimit(const Request& request, Response* response, DoneCallback done,
                                  Span* span) {
  if (span != nullptr && !span->active()) {
    span = nullptr;
  }
  if (span != nullptr) {
    DescribeRequest(request, *span);
  }
  if (absl::Status status = ValidateRequest(request, limits_); !status.ok()) {
    metrics_.CountRequest(Metrics::RequestOutcome::kInvalidArgument);
    std::move(done)(std::move(status));
    return;
  }
  std::shared_ptr<const Config> config = config_.Get();
  if (config == nullptr) {
    metrics_.CountRequest(Metrics::RequestOutcome::kUnavailable);
    std::move(done)(absl::UnavailableError("no rate limit configuration loaded yet"));
    return;
  }
  auto call = std::make_unique<PendingCall>();
  call->response = response;
  call->done = std::move(done);
  call->span = span;
  Resolve(request, std::move(config), resolve_options_, &call->plan);
  if (call->plan.refused_refund >= 0) {
    metrics_.CountRequest(Metrics::RequestOutcome::kInvalidArgument);
    metrics_.CountRefusedRefund();
    std::move(call->done)(absl::InvalidArgumentError(absl::StrCat(
        "descriptors[", call->plan.refused_refund,
        "]: is_negative_hits (a refund) is refused in domain '", request.domain(),
        "' by this server's --refuse_refunds")));
    return;
  }
  call->decisions.Reset(call->plan.checks.size());
  DecideByRule(call->plan, call->decisions, clock_);
  if (span == nullptr) {
    over_limit_.Answer(call->plan, call->decisions);
  } else {
    span->Add("sluice.checks", static_cast<int64_t>(call->plan.checks.size()));
    const int64_t start_us = span->tracer().NowMicros();
    over_limit_.Answer(call->plan, call->decisions);
    if (const size_t answered = CountDecidedBy(call->decisions, DecidedBy::kCache); answered > 0) {
      Span cache = Tracer::StartChildAt(span->parent(), "over_limit_cache", SpanKind::kInternal,
                                        start_us);
      cache.Add("sluice.checks_answered", static_cast<int64_t>(answered));
    }
  }
  if (call->plan.releases_leases && !unbacked_.Empty()) {
    unbacked_step_.MatchReleases(call->plan, call->decisions);
  }
  Evaluate(std::move(call));
}

void RateLimiter::Evaluate(std::unique_ptr<PendingCall> call) {
  const PlanChecks& checks = call->plan.checks;
  const size_t open = call->decisions.Open();
  if (open == 0) {
    Finish(std::move(call), absl::OkStatus());
    return;
  }
  const bool all_open = open == checks.size();
  std::vector<LimitCheck> remote;
  if (!all_open) {
    remote.reserve(open);
    call->remote_index.reserve(open);
    for (size_t c = 0; c < checks.size(); ++c) {
      if (call->decisions.by[c] == DecidedBy::kNobody) {
        call->remote_index.push_back(c);
        remote.push_back(checks[c]);
      }
    }
  }
  PendingCall* held = call.release();
  held->holders.store(2, std::memory_order_relaxed);
  // The callback captures two pointers, which fit in its inline storage (no allocation); with
  // every check open, remote_index is empty.
  backend_.Evaluate(all_open ? absl::MakeConstSpan(held->plan.checks) : absl::MakeConstSpan(remote),
                    held->span != nullptr ? held->span->parent() : TraceParent{},
                    [this, held](absl::Status status, absl::Span<const Decision> decisions) {
                      if (status.ok()) {
                        const bool all_open = held->remote_index.empty();
                        for (size_t r = 0; r < decisions.size(); ++r) {
                          const size_t c = all_open ? r : held->remote_index[r];
                          held->decisions.decisions[c] = decisions[r];
                          held->decisions.by[c] = DecidedBy::kBackend;
                        }
                      }
                      held->status = std::move(status);
                      LetGo(held);
                    });
  LetGo(held);
}

void RateLimiter::LetGo(PendingCall* call) {
  // acq_rel: the last holder sees everything the callback wrote.
  if (call->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    absl::Status status = std::move(call->status);
    Finish(std::unique_ptr<PendingCall>(call), std::move(status));
  }
}

void RateLimiter::Finish(std::unique_ptr<PendingCall> call, absl::Status status) {
  FailureMode policy = call->plan.failure_mode;
  if (!status.ok()) {
    metrics_.CountBackendFailure(FailureReasonOf(status));
    const int64_t start_us = call->span != nullptr ? call->span->tracer().NowMicros() : 0;
    policy = failure_policy_.Apply(status, call->plan, call->decisions);
    unbacked_step_.Record(status, policy, call->plan, call->decisions);
    if (call->span != nullptr) {
      TraceFailure(status, policy, start_us, call->decisions, *call->span);
    }
  }
  if (call->plan.charges_never_admitted) {
    MarkNeverAdmitted(call->plan, call->decisions);
  }
  over_limit_.Learn(call->plan, call->decisions);
  ResponseAccount account;
  Respond(call->plan, call->decisions, policy, respond_options_, call->response, &account);
  if (!account.give_back.empty()) {
    GiveBack(call->plan, call->decisions, account.give_back);
  }
  Count(account, *call->response);
  if (call->span != nullptr) {
    call->span->Add("ratelimit.overall_code",
                    Response::Code_Name(call->response->overall_code()));
  }
  std::move(call->done)(absl::OkStatus());
}

void RateLimiter::GiveBack(const RequestPlan& plan, const CheckDecisions& decisions,
                           absl::Span<const uint32_t> checks) {
  absl::InlinedVector<LimitCheck, kInlinePlanChecks> refunds;
  refunds.reserve(checks.size());
  for (const uint32_t c : checks) {
    LimitCheck& refund = refunds.emplace_back(plan.checks[c]);
    refund.refund = true;
    refund.group = c;  // each on its own
    refund.at_us = decisions.decisions[c].at_us;
  }
  metrics_.CountGivenBack(refunds.size());
  backend_.Evaluate(refunds, [this, count = refunds.size()](absl::Status status,
                                                            absl::Span<const Decision>) {
    if (!status.ok()) {
      metrics_.CountGiveBackFailure(count);
    }
  });
}

void RateLimiter::TraceFailure(const absl::Status& status, FailureMode policy, int64_t start_us,
                               const CheckDecisions& decisions, Span& span) {
  const std::string_view reason = FailureReasonName(FailureReasonOf(status));
  span.Add("sluice.failure_reason", absl::string_view(reason.data(), reason.size()));
  span.Add("sluice.failure_mode", FailureModeName(policy));
  span.SetError(status.message());
  if (policy == FailureMode::kLocal) {
    Span local =
        Tracer::StartChildAt(span.parent(), "local_fallback", SpanKind::kInternal, start_us);
    local.Add("sluice.checks_decided", static_cast<int64_t>(CountDecidedBy(decisions, DecidedBy::kLocal)));
  }
}

void RateLimiter::Count(const ResponseAccount& account, const Response& response) {
  for (const ResponseAccount::Descriptor& d : account.descriptors) {
    metrics_.CountDecision(d.algorithm, d.outcome);
    if (d.outcome == DecisionOutcome::kFailurePolicy) {
      continue;
    }
    if (d.stat_node != nullptr) {
      metrics_.CountNode(*d.stat_node, d.hits);
    } else {
      metrics_.CountRule(d.stat_key, d.hits);
    }
    if (d.hits.total_negative > 0) {
      metrics_.CountRefunded(d.algorithm, d.hits.total_negative);
    }
    if (d.hits.charged_over_limit > 0) {
      metrics_.CountChargedOverLimit(d.algorithm, d.hits.charged_over_limit);
    }
  }
  for (size_t mode = 0; mode < account.policy_decisions.size(); ++mode) {
    for (uint32_t n = account.policy_decisions[mode]; n > 0; --n) {
      metrics_.CountFailurePolicyDecision(static_cast<FailureMode>(mode));
    }
  }
  if (account.global_shadow_mode) {
    metrics_.CountGlobalShadowMode();
  }
  metrics_.CountRequest(response.overall_code() == Response::OK
                            ? Metrics::RequestOutcome::kOk
                            : Metrics::RequestOutcome::kOverLimit);
}

}  // namespace sluice
