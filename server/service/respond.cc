#include "server/service/respond.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/struct.pb.h"
#include "server/common/saturating.h"

namespace sluice {
namespace {

using Response = envoy::service::ratelimit::v3::RateLimitResponse;
using ResponseLimit = Response::RateLimit;

constexpr uint32_t kUnlimitedRemaining = std::numeric_limits<uint32_t>::max();
// The wait of a descriptor that can never pass (Decision::never): longer than any other.
constexpr int64_t kNeverUs = std::numeric_limits<int64_t>::max();

RuleHits CountHits(const Decision& decision, const LimitParams& params, uint64_t hits,
                   double near_ratio, bool from_cache, bool shadow) {
  RuleHits out;
  const uint64_t capacity = Capacity(params);
  // float, as upstream computes it, so thresholds on exact boundaries agree.
  const uint64_t near = static_cast<uint64_t>(std::floor(
      static_cast<double>(static_cast<float>(capacity) * static_cast<float>(near_ratio))));
  const uint64_t held = capacity > decision.remaining ? capacity - decision.remaining : 0;
  out.total = hits;
  if (decision.allowed) {
    const uint64_t after = held;
    const uint64_t before = after > hits ? after - hits : 0;
    out.within_limit = hits;
    if (after > near) {
      out.near_limit = before >= near ? hits : after - near;
    }
    return out;
  }
  if (from_cache) {
    out.over_limit = hits;
    out.over_limit_with_local_cache = hits;
    out.shadow_mode = shadow ? hits : 0;
    return out;
  }
  const uint64_t before = held;
  const uint64_t after =
      before + hits < before ? std::numeric_limits<uint64_t>::max() : before + hits;
  out.over_limit = before >= capacity ? hits : after - capacity;
  if (before < capacity) {
    out.near_limit = capacity - std::max(near, before);
  }
  out.shadow_mode = shadow ? out.over_limit : 0;
  return out;
}

// Merges `from` into `into`: keys already present win, except that two structs merge
// recursively (envoyproxy/ratelimit's mergeMetadata).
void MergeMetadata(const google::protobuf::Struct& from, google::protobuf::Struct* into) {
  auto& fields = *into->mutable_fields();
  for (const auto& [name, value] : from.fields()) {
    auto it = fields.find(name);
    if (it == fields.end()) {
      fields[name] = value;
    } else if (it->second.has_struct_value() && value.has_struct_value()) {
      MergeMetadata(value.struct_value(), it->second.mutable_struct_value());
    }
  }
}

// Sets *d (on the response's arena) in place: no temporary message to copy from.
void SetDuration(int64_t micros, google::protobuf::Duration* d) {
  micros = std::max<int64_t>(0, micros);
  d->set_seconds(micros / 1000000);
  d->set_nanos(static_cast<int32_t>((micros % 1000000) * 1000));
}

uint32_t ClampRemaining(uint64_t remaining) {
  return static_cast<uint32_t>(std::min<uint64_t>(remaining, std::numeric_limits<uint32_t>::max()));
}

void FillLimit(const RateLimitRule& rule, ResponseLimit* limit) {
  limit->set_requests_per_unit(rule.requests_per_unit);
  limit->set_unit(static_cast<ResponseLimit::Unit>(static_cast<int>(rule.unit)));
  if (!rule.name.empty()) {
    limit->set_name(rule.name);
  }
}

void AddHeader(Response* response, absl::string_view key, std::string value) {
  auto* header = response->add_response_headers_to_add();
  header->set_key(std::string(key));
  header->set_value(std::move(value));
}

// A duration in whole seconds, rounded up (a client waiting that long is not early).
int64_t WholeSecondsUp(const google::protobuf::Duration& duration) {
  return duration.seconds() + (duration.nanos() > 0 ? 1 : 0);
}

// `text` as a Structured Field String (RFC 8941 3.3.3): quoted, with `"` and `\` escaped;
// bytes outside printable ASCII, which a String cannot hold, become '_'.
std::string SfString(absl::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (ch < 0x20 || ch > 0x7e) {
      out.push_back('_');
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
  return out;
}

// What the descriptors of one response add up to, as Respond walks them.
struct Tally {
  size_t failed = 0;  // over, not in quota mode
  size_t quota_total = 0;
  size_t quota_failed = 0;
  // The longest wait among failed descriptors, and the shortest among failed quota ones;
  // kNeverUs for a descriptor that can never pass; -1: none.
  int64_t retry_after_us = -1;
  int64_t quota_retry_after_us = -1;
  int64_t delay_us = 0;                   // leaky bucket, admitted: the longest shaping delay
  absl::InlinedVector<size_t, 8> passed;  // descriptors answered OK
  // Per descriptor, the rule whose limit its status shows (null: none).
  absl::InlinedVector<const RateLimitRule*, 8> shown;
};

// The most restrictive decision made among a descriptor's checks [first, end): among denials a
// request that can never pass, else the longest wait; without a denial, the least remaining.
struct Choice {
  size_t chosen;  // == end when no check was decided
  bool denied = false;
  bool undecided = false;  // some check was not decided
  bool local = false;      // some check was decided by the failure mode local
};

Choice Choose(const CheckDecisions& decisions, size_t first, size_t end) {
  Choice choice{end};
  if (end == first + 1) {  // one rule, the common case
    const DecidedBy by = decisions.by[first];
    choice.undecided = by == DecidedBy::kNobody;
    choice.local = by == DecidedBy::kLocal;
    if (!choice.undecided) {
      choice.chosen = first;
      choice.denied = !decisions.decisions[first].allowed;
    }
    return choice;
  }
  for (size_t c = first; c < end; ++c) {
    if (decisions.by[c] == DecidedBy::kNobody) {
      choice.undecided = true;
      continue;
    }
    choice.local = choice.local || decisions.by[c] == DecidedBy::kLocal;
    const Decision& d = decisions.decisions[c];
    if (choice.chosen == end) {
      choice.chosen = c;
      choice.denied = !d.allowed;
      continue;
    }
    const Decision& best = decisions.decisions[choice.chosen];
    if (!d.allowed) {
      if (!choice.denied || (d.never && !best.never) ||
          (d.never == best.never && d.retry_after_us > best.retry_after_us)) {
        choice.chosen = c;
      }
      choice.denied = true;
    } else if (!choice.denied && d.remaining < best.remaining) {
      choice.chosen = c;
    }
  }
  return choice;
}

// The hits a denied descriptor's checks [first, end) were charged all the same: those of the
// first check that charges when denied and was decided by a backend (the remote one, or the
// local fallback's), else 0.
uint64_t ChargedWhileDenied(const RequestPlan& plan, const CheckDecisions& decisions,
                            size_t first, size_t end) {
  for (size_t c = first; c < end; ++c) {
    const DecidedBy by = decisions.by[c];
    if ((by == DecidedBy::kBackend || by == DecidedBy::kLocal) &&
        ChargesWhenDenied(plan.checks[c].params, plan.checks[c].hits)) {
      return std::min(plan.checks[c].hits, kMaxChargedHits);
    }
  }
  return 0;
}

// Descriptor `i`, which the backend could not decide, answered by failure mode `policy`: counted
// and shown with its first rule; the caller sets the code.
void AnswerByPolicy(const DescriptorPlan& descriptor, size_t i, FailureMode policy,
                    Response::DescriptorStatus* out, ResponseAccount& account, Tally& tally) {
  ++account.policy_decisions[static_cast<size_t>(policy)];
  const RateLimitRule& rule = *descriptor.rules.front();
  tally.shown[i] = &rule;
  account.descriptors.push_back(
      {rule.params.algorithm, DecisionOutcome::kFailurePolicy, absl::string_view(), RuleHits{}});
  FillLimit(rule, out->mutable_current_limit());
}

// Answers refund descriptor `i` (which has rules): OK whatever happened, since a refund is never
// denied (when the backend could not apply it, the failure mode is counted but does not deny);
// else the state after it, as a check of 0 hits shows it.
void AnswerRefund(const RequestPlan& plan, size_t i, const CheckDecisions& decisions,
                  const Choice& choice, FailureMode policy, Response::DescriptorStatus* out,
                  ResponseAccount& account, Tally& tally) {
  const DescriptorPlan& descriptor = plan.descriptors[i];
  const size_t first = descriptor.first_check;
  if (choice.undecided) {
    AnswerByPolicy(descriptor, i, policy, out, account, tally);
    return;
  }
  const Decision& decision = decisions.decisions[choice.chosen];
  const RateLimitRule& rule = *descriptor.rules[choice.chosen - first];
  tally.shown[i] = &rule;
  FillLimit(rule, out->mutable_current_limit());
  out->set_limit_remaining(ClampRemaining(decision.remaining));
  SetDuration(decision.reset_after_us, out->mutable_duration_until_reset());
  RuleHits hits;
  hits.total_negative = std::min(descriptor.hits, kMaxChargedHits);
  account.descriptors.push_back({rule.params.algorithm, DecisionOutcome::kRefunded,
                                 descriptor.stat_key, hits,
                                 descriptor.owned_stat_key.empty() ? descriptor.node : nullptr});
}

// Answers descriptor `i` (which has rules) into *out; returns its wait if it is over the limit
// and the wait is known (kNeverUs: never passes), else -1.
int64_t AnswerWithRules(const RequestPlan& plan, size_t i, const CheckDecisions& decisions,
                        FailureMode policy, const RespondOptions& options,
                        Response::DescriptorStatus* out, ResponseAccount& account, Tally& tally) {
  const DescriptorPlan& descriptor = plan.descriptors[i];
  const size_t first = descriptor.first_check;
  const size_t end = first + descriptor.rules.size();
  const bool shadow = descriptor.shadow_mode();
  const Choice choice = Choose(decisions, first, end);
  if (choice.local) {
    ++account.policy_decisions[static_cast<size_t>(FailureMode::kLocal)];
  }
  if (descriptor.refund) {
    AnswerRefund(plan, i, decisions, choice, policy, out, account, tally);
    return -1;
  }
  if (choice.undecided && !choice.denied) {
    // The backend could not decide it: the failure mode answers. (A denial made without the
    // backend stands whatever the mode.)
    AnswerByPolicy(descriptor, i, policy, out, account, tally);
    if (policy == FailureMode::kDeny && !shadow) {
      out->set_code(Response::OVER_LIMIT);  // with no wait known
    }
    return -1;
  }
  const Decision& decision = decisions.decisions[choice.chosen];
  const DecidedBy by = decisions.by[choice.chosen];
  const RateLimitRule& rule = *descriptor.rules[choice.chosen - first];
  tally.shown[i] = &rule;
  FillLimit(rule, out->mutable_current_limit());
  // The check's params: a local decision is measured against the scaled capacity.
  RuleHits hits = CountHits(decision, plan.checks[choice.chosen].params, descriptor.hits,
                            options.near_limit_ratio, by == DecidedBy::kCache, shadow);
  if (choice.denied) {
    hits.charged_over_limit = ChargedWhileDenied(plan, decisions, first, end);
  }
  account.descriptors.push_back(
      {rule.params.algorithm,
       !choice.denied            ? DecisionOutcome::kWithinLimit
       : shadow                  ? DecisionOutcome::kShadowMode
       : decision.never          ? DecisionOutcome::kNeverAdmitted
       : by == DecidedBy::kCache ? DecisionOutcome::kOverLimitCached
                                 : DecisionOutcome::kOverLimit,
       descriptor.stat_key, hits,
       descriptor.owned_stat_key.empty() ? descriptor.node : nullptr});
  if (!choice.denied) {
    out->set_limit_remaining(ClampRemaining(decision.remaining));
    SetDuration(decision.reset_after_us, out->mutable_duration_until_reset());
    for (size_t c = first; c < end; ++c) {
      tally.delay_us = std::max(tally.delay_us, decisions.decisions[c].delay_us);
    }
    return -1;
  }
  out->set_limit_remaining(0);
  // Over limit, the reset is when the request could succeed again: never earlier.
  SetDuration(decision.retry_after_us, out->mutable_duration_until_reset());
  if (shadow) {
    return -1;
  }
  out->set_code(Response::OVER_LIMIT);
  return decision.never ? kNeverUs : decision.retry_after_us;
}

// Answers descriptor `i` into a new status of *response and adds it to the tally.
void AnswerDescriptor(const RequestPlan& plan, size_t i, const CheckDecisions& decisions,
                      FailureMode policy, const RespondOptions& options, Response* response,
                      ResponseAccount& account, Tally& tally) {
  const DescriptorPlan& descriptor = plan.descriptors[i];
  Response::DescriptorStatus* out = response->add_statuses();
  out->set_code(Response::OK);
  if (descriptor.rules.empty()) {
    if (descriptor.unlimited) {
      out->set_limit_remaining(kUnlimitedRemaining);
      return;
    }
    // Without a limit: passed, and under --quota_mode a quota that is never spent.
    tally.quota_total += options.global_quota_mode ? 1 : 0;
    tally.passed.push_back(i);
    return;
  }
  // A refund spends no quota.
  const bool quota =
      !descriptor.refund && (options.global_quota_mode || descriptor.quota_mode());
  tally.quota_total += quota ? 1 : 0;
  const int64_t wait_us =
      AnswerWithRules(plan, i, decisions, policy, options, out, account, tally);
  if (out->code() != Response::OVER_LIMIT) {
    tally.passed.push_back(i);
  } else if (quota) {
    ++tally.quota_failed;
    if (wait_us >= 0 && (tally.quota_retry_after_us < 0 || wait_us < tally.quota_retry_after_us)) {
      tally.quota_retry_after_us = wait_us;
    }
  } else {
    ++tally.failed;
    tally.retry_after_us = std::max(tally.retry_after_us, wait_us);
  }
}

// The descriptor whose limit the RateLimit headers show, as envoyproxy/ratelimit chooses it: the
// one with a limit and the least remaining, or the last one over its limit (quota-mode ones
// aside); -1 if none.
int ClosestToLimit(const RequestPlan& plan, const Response& response,
                   const RespondOptions& options) {
  int chosen = -1;
  uint32_t least = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < plan.descriptors.size(); ++i) {
    const Response::DescriptorStatus& status = response.statuses(static_cast<int>(i));
    if (status.has_current_limit() && status.limit_remaining() < least) {
      chosen = static_cast<int>(i);
      least = status.limit_remaining();
    }
    const bool quota = options.global_quota_mode || plan.descriptors[i].quota_mode();
    if (status.code() == Response::OVER_LIMIT && !quota) {
      chosen = static_cast<int>(i);
      least = 0;
    }
  }
  return chosen;
}

// --rate_limit_headers and --ietf_rate_limit_headers, for ClosestToLimit's descriptor.
void AddRateLimitHeaders(const RequestPlan& plan, const Tally& tally,
                         const RespondOptions& options, Response* response) {
  const int chosen = ClosestToLimit(plan, *response, options);
  if (chosen < 0) {
    return;
  }
  const Response::DescriptorStatus& status = response->statuses(chosen);
  const std::string limit = absl::StrCat(status.current_limit().requests_per_unit());
  const std::string remaining = absl::StrCat(status.limit_remaining());
  const std::string reset = absl::StrCat(WholeSecondsUp(status.duration_until_reset()));
  if (options.rate_limit_headers) {
    AddHeader(response, options.limit_header, limit);
    AddHeader(response, options.remaining_header, remaining);
    AddHeader(response, options.reset_header, reset);
  }
  const RateLimitRule* shown = tally.shown[static_cast<size_t>(chosen)];
  if (options.ietf_rate_limit_headers && shown != nullptr) {
    // draft-ietf-httpapi-ratelimit-headers (-09/-10): one quota policy item, named by the
    // rule's name or else its stat key, in both fields.
    const std::string name = SfString(
        shown->name.empty() ? plan.descriptors[static_cast<size_t>(chosen)].stat_key
                            : absl::string_view(shown->name));
    AddHeader(response, "RateLimit-Policy",
              absl::StrCat(name, ";q=", limit, ";w=", shown->params.period_us / 1000000));
    AddHeader(response, "RateLimit", absl::StrCat(name, ";r=", remaining, ";t=", reset));
  }
}

// The request's part of the dynamic metadata, then the merged `metadata` of the descriptors that
// passed (envoyproxy/ratelimit's layout).
void AddRequestMetadata(RequestPlan& plan, absl::Span<const size_t> passed, Response* response) {
  auto& fields = *response->mutable_dynamic_metadata()->mutable_fields();
  for (auto& [name, value] : *plan.request_metadata.mutable_fields()) {
    fields[name] = std::move(value);
  }
  google::protobuf::Struct merged;
  for (size_t i : passed) {
    const DescriptorPlan& descriptor = plan.descriptors[i];
    if (!descriptor.rules.empty() && descriptor.node != nullptr &&
        descriptor.node->metadata != nullptr) {
      MergeMetadata(*descriptor.node->metadata, &merged);
    }
  }
  if (!merged.fields().empty()) {
    *fields["metadata"].mutable_struct_value() = std::move(merged);
  }
}

// --request_all_or_nothing, on a request answered OVER_LIMIT: lists what the descriptors that
// passed took from the backend in account.give_back, and shows in each one's status what remains
// once it is given back (each check's remaining plus its hits, up to its capacity; the least).
// What the failure mode local took on this replica's share stays taken.
void TakeNothing(const RequestPlan& plan, const CheckDecisions& decisions, const Tally& tally,
                 Response* response, ResponseAccount& account) {
  for (const size_t i : tally.passed) {
    const DescriptorPlan& descriptor = plan.descriptors[i];
    if (descriptor.refund || descriptor.rules.empty()) {
      continue;
    }
    const size_t first = descriptor.first_check;
    const size_t end = first + descriptor.rules.size();
    bool given = false;
    bool shown_as_is = false;  // a denial (shadow mode) or a failure mode's answer
    uint64_t least = std::numeric_limits<uint64_t>::max();
    for (size_t c = first; c < end; ++c) {
      const LimitCheck& check = plan.checks[c];
      const Decision& decision = decisions.decisions[c];
      if (decisions.by[c] == DecidedBy::kNobody || !decision.allowed) {
        shown_as_is = true;
        continue;
      }
      uint64_t remaining = decision.remaining;
      if (decisions.by[c] == DecidedBy::kBackend && check.hits > 0 &&
          check.params.charge != Charge::kAlways) {
        account.give_back.push_back(static_cast<uint32_t>(c));
        given = true;
        remaining = std::min(SaturatingAdd(remaining, check.hits), Capacity(check.params));
      }
      least = std::min(least, remaining);
    }
    if (given && !shown_as_is) {
      response->mutable_statuses(static_cast<int>(i))->set_limit_remaining(ClampRemaining(least));
    }
  }
}

}  // namespace

void Respond(RequestPlan& plan, const CheckDecisions& decisions, FailureMode policy,
             const RespondOptions& options, Response* response, ResponseAccount* account) {
  Tally tally;
  tally.shown.assign(plan.descriptors.size(), nullptr);
  for (size_t i = 0; i < plan.descriptors.size(); ++i) {
    AnswerDescriptor(plan, i, decisions, policy, options, response, *account, tally);
  }
  const bool quota_exhausted = tally.quota_total > 0 && tally.quota_failed == tally.quota_total;
  bool over_limit = tally.failed > 0 || quota_exhausted;
  if (over_limit && options.global_shadow_mode) {
    over_limit = false;
    account->global_shadow_mode = true;
  }
  response->set_overall_code(over_limit ? Response::OVER_LIMIT : Response::OK);
  if (over_limit && options.request_all_or_nothing) {
    TakeNothing(plan, decisions, tally, response, *account);
  }
  // One quota descriptor left unspent: quotas do not hold the request.
  const int64_t retry_after_us = std::max(
      tally.retry_after_us, quota_exhausted ? tally.quota_retry_after_us : int64_t{-1});
  // A request that can never pass as it is gets no retry-after: no wait would help.
  if (over_limit && options.retry_after_header && retry_after_us >= 0 &&
      retry_after_us != kNeverUs) {
    // Whole seconds, rounded up, so that a client retrying then is not rejected again.
    AddHeader(response, "retry-after", absl::StrCat((retry_after_us + 999999) / 1000000));
  }
  if (options.rate_limit_headers || options.ietf_rate_limit_headers) {
    AddRateLimitHeaders(plan, tally, options, response);
  }
  if (options.response_dynamic_metadata) {
    AddRequestMetadata(plan, tally.passed, response);
  }
  if (tally.delay_us > 0 && response->overall_code() == Response::OK) {
    (*response->mutable_dynamic_metadata()->mutable_fields())["sluice.delay_ms"]
        .set_number_value(static_cast<double>(tally.delay_us) / 1000.0);
  }
}

}  // namespace sluice
