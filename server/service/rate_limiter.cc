#include "server/service/rate_limiter.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "server/backend/storage_key.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

using Response = RateLimiter::Response;
using ResponseLimit = Response::RateLimit;

constexpr uint64_t kMaxHits = std::numeric_limits<uint32_t>::max();

// What one request descriptor resolved to.
struct DescriptorPlan {
  // Rules that produce checks, in the node's order; empty: no limit applies (OK).
  absl::InlinedVector<const RateLimitRule*, 2> rules;
  const DescriptorNode* node = nullptr;  // null for request overrides and no match
  uint64_t hits = 1;
  size_t first_check = 0;
  // The metrics key: the node's full_key, or (detailed_metric, overrides) one built from the
  // request's values and held in owned_stat_key. Plans never move once sized, so the view holds.
  absl::string_view stat_key;
  std::string owned_stat_key;
};


absl::Status CheckSize(absl::string_view what, absl::string_view text, size_t max) {
  if (text.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", text.size(), " bytes (at most ", max, ")"));
  }
  return absl::OkStatus();
}

std::string DescriptorStatKey(absl::string_view domain,
                              const envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d) {
  std::string key(domain);
  for (const auto& e : d.entries()) {
    absl::StrAppend(&key, ".", e.key());
    if (!e.value().empty()) {
      absl::StrAppend(&key, "_", e.value());
    }
  }
  return key;
}

google::protobuf::Duration ToDuration(int64_t micros) {
  google::protobuf::Duration d;
  micros = std::max<int64_t>(0, micros);
  d.set_seconds(micros / 1000000);
  d.set_nanos(static_cast<int32_t>((micros % 1000000) * 1000));
  return d;
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

// Co-location: when the keys of every descriptor of the request share one hash tag (rules with
// the same `hash_tag` entry) and are distinct, the whole request is one group, decided
// all-or-nothing by one script call. Shadow-mode descriptors never join: their denial must
// not stop the others from consuming. Otherwise descriptors stay independent, as in
// envoyproxy/ratelimit.
void CoLocate(const std::vector<DescriptorPlan>& plans, std::vector<LimitCheck>& checks) {
  size_t descriptors = 0;
  bool have_tag = false;
  absl::string_view tag;
  for (const DescriptorPlan& plan : plans) {
    if (plan.rules.empty()) {
      continue;
    }
    if (plan.node != nullptr && plan.node->shadow_mode) {
      return;
    }
    ++descriptors;
    for (size_t c = plan.first_check; c < plan.first_check + plan.rules.size(); ++c) {
      absl::string_view t = HashTagOf(checks[c].key);
      if (!have_tag) {
        tag = t;
        have_tag = true;
      } else if (t != tag) {
        return;
      }
    }
  }
  if (descriptors < 2) {
    return;
  }
  absl::flat_hash_set<absl::string_view> keys;
  for (const LimitCheck& check : checks) {
    if (!keys.insert(check.key).second) {
      return;  // the same descriptor twice: each occurrence counts on its own
    }
  }
  for (LimitCheck& check : checks) {
    check.group = 0;
  }
}

}  // namespace

// Everything a call needs after the backend answers. The snapshot keeps the rules alive.
struct RateLimiter::PendingCall {
  std::shared_ptr<const Config> config;
  std::vector<DescriptorPlan> plans;
  std::vector<RateLimitRule> overrides;  // storage for request-supplied limits
  std::vector<std::string> keys;
  // Per check: its decision, and whether one was made (by the cache or the backend).
  std::vector<Decision> decisions;
  std::vector<bool> known;
  // Checks sent to the backend, by index, when the cache answered some of them.
  std::vector<size_t> remote_index;
  Response* response = nullptr;
  RateLimiter::DoneCallback done;
};

RateLimiter::RateLimiter(const ConfigStore& config, Backend& backend, Metrics& metrics,
                         RateLimiterOptions options, OverLimitCache* cache)
    : config_(config),
      backend_(backend),
      metrics_(metrics),
      options_(std::move(options)),
      cache_(cache) {}

absl::Status RateLimiter::Validate(const Request& request) const {
  if (request.domain().empty()) {
    return absl::InvalidArgumentError("domain must not be empty");
  }
  if (absl::Status s = CheckSize("domain", request.domain(), options_.max_key_bytes); !s.ok()) {
    return s;
  }
  if (request.descriptors().empty()) {
    return absl::InvalidArgumentError("descriptors must not be empty");
  }
  if (static_cast<size_t>(request.descriptors_size()) > options_.max_descriptors) {
    return absl::InvalidArgumentError(absl::StrCat("too many descriptors: ",
                                                   request.descriptors_size(), " (at most ",
                                                   options_.max_descriptors, ")"));
  }
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& d = request.descriptors(i);
    std::string where = absl::StrCat("descriptors[", i, "]");
    if (d.entries().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".entries must not be empty"));
    }
    if (static_cast<size_t>(d.entries_size()) > options_.max_entries) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": too many entries: ",
                                                     d.entries_size(), " (at most ",
                                                     options_.max_entries, ")"));
    }
    for (int j = 0; j < d.entries_size(); ++j) {
      const auto& e = d.entries(j);
      std::string entry = absl::StrCat(where, ".entries[", j, "]");
      if (e.key().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(entry, ".key must not be empty"));
      }
      if (absl::Status s = CheckSize(entry + ".key", e.key(), options_.max_key_bytes); !s.ok()) {
        return s;
      }
      if (absl::Status s = CheckSize(entry + ".value", e.value(), options_.max_key_bytes);
          !s.ok()) {
        return s;
      }
    }
    if (d.has_hits_addend() && d.hits_addend().value() > kMaxHits) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".hits_addend is ",
                                                     d.hits_addend().value(), " (at most ",
                                                     kMaxHits, ")"));
    }
    if (d.has_limit()) {
      int unit = d.limit().unit();
      if (unit < static_cast<int>(TimeUnit::kSecond) || unit > static_cast<int>(TimeUnit::kWeek)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".limit.unit must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or "
                                "YEAR (got ", unit, ")"));
      }
    }
  }
  return absl::OkStatus();
}

void RateLimiter::ShouldRateLimit(const Request& request, Response* response, DoneCallback done) {
  if (absl::Status status = Validate(request); !status.ok()) {
    metrics_.CountRequest("invalid_argument");
    std::move(done)(std::move(status));
    return;
  }

  auto call = std::make_unique<RateLimiter::PendingCall>();
  call->config = config_.Get();
  call->response = response;
  call->done = std::move(done);
  const Config& config = *call->config;
  const std::string& domain = request.domain();
  const bool known_domain = config.HasDomain(domain);
  const uint64_t request_hits = request.hits_addend() == 0 ? 1 : request.hits_addend();
  const int n = request.descriptors_size();
  call->plans.resize(n);
  call->overrides.reserve(n);

  // Resolve each descriptor; collect the names that matched rules replace.
  absl::InlinedVector<DescriptorEntryView, 8> entries;
  absl::flat_hash_set<absl::string_view> replaced;
  for (int i = 0; i < n; ++i) {
    const auto& d = request.descriptors(i);
    DescriptorPlan& plan = call->plans[i];
    plan.hits = d.has_hits_addend() ? d.hits_addend().value() : request_hits;
    if (!known_domain) {
      continue;
    }
    if (d.has_limit()) {
      // A limit supplied by the caller replaces the configured one (envoyproxy/ratelimit's
      // override): a fixed window of requests_per_unit per unit, never in shadow mode.
      RateLimitRule& rule = call->overrides.emplace_back();
      rule.requests_per_unit = d.limit().requests_per_unit();
      rule.unit = static_cast<TimeUnit>(d.limit().unit());
      rule.params.algorithm = Algorithm::kFixedWindow;
      rule.params.limit = rule.requests_per_unit;
      rule.params.period_us = UnitSeconds(rule.unit) * 1000000;
      rule.params.burst = rule.requests_per_unit;
      rule.key_suffix = absl::StrCat("fw:", UnitSeconds(rule.unit));
      plan.rules.push_back(&rule);
      plan.owned_stat_key = DescriptorStatKey(domain, d);
      plan.stat_key = plan.owned_stat_key;
      continue;
    }
    entries.clear();
    for (const auto& e : d.entries()) {
      entries.push_back({e.key(), e.value()});
    }
    const DescriptorNode* node = config.Match(domain, entries);
    if (node == nullptr) {
      continue;
    }
    plan.node = node;
    if (node->detailed_metric) {
      plan.owned_stat_key = DescriptorStatKey(domain, d);
      plan.stat_key = plan.owned_stat_key;
    } else {
      plan.stat_key = node->full_key;  // the config snapshot outlives the call
    }
    for (const RateLimitRule& rule : node->rules) {
      if (rule.unlimited) {
        continue;
      }
      plan.rules.push_back(&rule);
      for (const std::string& name : rule.replaces) {
        replaced.insert(name);
      }
    }
  }

  // Drop replaced rules, then build one check per remaining rule.
  std::vector<LimitCheck> checks;
  for (int i = 0; i < n; ++i) {
    DescriptorPlan& plan = call->plans[i];
    if (!replaced.empty()) {
      plan.rules.erase(std::remove_if(plan.rules.begin(), plan.rules.end(),
                                      [&](const RateLimitRule* r) {
                                        return !r->name.empty() && replaced.contains(r->name);
                                      }),
                       plan.rules.end());
    }
    plan.first_check = checks.size();
    if (plan.rules.empty()) {
      continue;
    }
    const auto& d = request.descriptors(i);
    entries.clear();
    for (const auto& e : d.entries()) {
      entries.push_back({e.key(), e.value()});
    }
    for (const RateLimitRule* rule : plan.rules) {
      call->keys.push_back(
          StorageKey(options_.key_prefix, domain, entries, rule->key_suffix, rule->hash_tag));
      checks.push_back(LimitCheck{{}, rule->params, plan.hits, static_cast<uint32_t>(i)});
    }
  }
  for (size_t c = 0; c < checks.size(); ++c) {
    checks[c].key = call->keys[c];
  }
  CoLocate(call->plans, checks);

  // Lone checks the over-limit cache knows to be denied are answered here; the rest go to the
  // backend. (A group is all-or-nothing and needs every member's decision, so groups always go.)
  call->decisions.assign(checks.size(), Decision{});
  call->known.assign(checks.size(), false);
  std::vector<LimitCheck> remote;
  if (cache_ != nullptr) {
    if (const Config* seen = seen_config_.exchange(call->config.get()); seen != call->config.get()) {
      cache_->Clear();  // a new config may admit what the old one denied
    }
    for (size_t c = 0; c < checks.size(); ++c) {
      const bool lone = (c == 0 || checks[c - 1].group != checks[c].group) &&
                        (c + 1 == checks.size() || checks[c + 1].group != checks[c].group);
      int64_t wait = lone ? cache_->DeniedFor(checks[c].key, checks[c].hits) : 0;
      if (wait > 0) {
        call->decisions[c] = Decision{false, 0, wait, wait, 0};
        call->known[c] = true;
      } else {
        call->remote_index.push_back(c);
      }
    }
    if (call->remote_index.size() < checks.size()) {
      remote.reserve(call->remote_index.size());
      for (size_t c : call->remote_index) {
        remote.push_back(checks[c]);
      }
    }
  }
  const bool all_remote = cache_ == nullptr || call->remote_index.size() == checks.size();
  if (!all_remote && remote.empty()) {
    Finish(std::move(call), absl::OkStatus());
    return;
  }
  backend_.Evaluate(all_remote ? absl::MakeConstSpan(checks) : absl::MakeConstSpan(remote),
                    [this, all_remote, call = std::move(call)](
                        absl::Status status, absl::Span<const Decision> decisions) mutable {
                      if (status.ok()) {
                        for (size_t r = 0; r < decisions.size(); ++r) {
                          size_t c = all_remote ? r : call->remote_index[r];
                          call->decisions[c] = decisions[r];
                          call->known[c] = true;
                        }
                      }
                      Finish(std::move(call), std::move(status));
                    });
}

void RateLimiter::Finish(std::unique_ptr<PendingCall> call, absl::Status status) {
  Response* response = call->response;
  response->set_overall_code(Response::OK);
  int64_t retry_after_us = -1;  // the longest wait among descriptors over limit
  int64_t delay_us = 0;
  if (!status.ok()) {
    metrics_.CountBackendFailure();
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "backend " << backend_.Name() << " could not decide: " << status
        << "; answering by failure_mode="
        << (options_.failure_mode == FailureMode::kAllow ? "allow" : "deny");
  }
  const std::vector<Decision>& decisions = call->decisions;
  for (size_t i = 0; i < call->plans.size(); ++i) {
    const DescriptorPlan& plan = call->plans[i];
    auto* out = response->add_statuses();
    out->set_code(Response::OK);
    if (plan.rules.empty()) {
      continue;
    }
    const size_t first = plan.first_check;
    const size_t end = first + plan.rules.size();
    const bool shadow = plan.node != nullptr && plan.node->shadow_mode;
    if (!std::all_of(call->known.begin() + first, call->known.begin() + end,
                     [](bool k) { return k; })) {
      // The backend could not decide this descriptor: the failure policy answers.
      FillLimit(*plan.rules.front(), out->mutable_current_limit());
      if (options_.failure_mode == FailureMode::kDeny && !shadow) {
        out->set_code(Response::OVER_LIMIT);
        response->set_overall_code(Response::OVER_LIMIT);
      }
      continue;
    }
    // The most restrictive rule: among denials the longest wait, else the least remaining.
    size_t chosen = first;
    bool denied = false;
    for (size_t c = first; c < end; ++c) {
      const Decision& d = decisions[c];
      const Decision& best = decisions[chosen];
      if (!d.allowed) {
        if (!denied || d.retry_after_us > best.retry_after_us) {
          chosen = c;
        }
        denied = true;
      } else if (!denied && d.remaining < best.remaining) {
        chosen = c;
      }
    }
    if (cache_ != nullptr && plan.rules.size() == 1 && denied) {
      cache_->Remember(call->keys[first], plan.hits, decisions[first].retry_after_us);
    }
    const Decision& decision = decisions[chosen];
    const RateLimitRule& rule = *plan.rules[chosen - first];
    FillLimit(rule, out->mutable_current_limit());
    RuleCounters& counters = metrics_.ForRule(plan.stat_key);
    counters.total_hits->Increment(static_cast<double>(plan.hits));
    if (denied) {
      counters.over_limit->Increment(static_cast<double>(plan.hits));
      out->set_limit_remaining(0);
      // Over limit, the reset is when the request could succeed again: never earlier.
      *out->mutable_duration_until_reset() = ToDuration(decision.retry_after_us);
      if (shadow) {
        counters.shadow_mode->Increment(static_cast<double>(plan.hits));
      } else {
        out->set_code(Response::OVER_LIMIT);
        response->set_overall_code(Response::OVER_LIMIT);
        retry_after_us = std::max(retry_after_us, decision.retry_after_us);
      }
    } else {
      counters.within_limit->Increment(static_cast<double>(plan.hits));
      out->set_limit_remaining(ClampRemaining(decision.remaining));
      *out->mutable_duration_until_reset() = ToDuration(decision.reset_after_us);
      for (size_t c = first; c < end; ++c) {
        delay_us = std::max(delay_us, decisions[c].delay_us);
      }
    }
  }
  if (retry_after_us >= 0) {
    // Whole seconds, rounded up, so that a client retrying then is not rejected again.
    AddHeader(response, "retry-after", absl::StrCat((retry_after_us + 999999) / 1000000));
  }
  if (delay_us > 0 && response->overall_code() == Response::OK) {
    (*response->mutable_dynamic_metadata()->mutable_fields())["sluice.delay_ms"]
        .set_number_value(static_cast<double>(delay_us) / 1000.0);
  }
  metrics_.CountRequest(response->overall_code() == Response::OK ? "ok" : "over_limit");
  std::move(call->done)(absl::OkStatus());
}

}  // namespace sluice
