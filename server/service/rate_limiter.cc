#include "server/service/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "server/key/storage_key.h"
#include "server/redis/cluster/hash_slot.h"
#include "server/common/logging.h"
#include "server/common/std_view.h"

namespace sluice {
namespace {

using Response = RateLimiter::Response;
using ResponseLimit = Response::RateLimit;

constexpr uint32_t kUnlimitedRemaining = std::numeric_limits<uint32_t>::max();

// What one request descriptor resolved to.
struct DescriptorPlan {
  // Rules that produce checks, in the node's order; empty: no limit applies (OK).
  absl::InlinedVector<const RateLimitRule*, 2> rules;
  const DescriptorNode* node = nullptr;  // null for request overrides and no match
  uint64_t hits = 1;
  size_t first_check = 0;
  bool unlimited = false;  // matched an unlimited rule: OK, remaining 2^32 - 1, no limit
  // Entries whose value is a share_threshold pattern, by index (empty when none).
  absl::InlinedVector<absl::string_view, 2> shared_patterns;
  // The metrics key: the node's full_key, or (detailed_metric, overrides) one built from the
  // request's values and held in owned_stat_key. Plans never move once sized, so the view holds.
  absl::string_view stat_key;
  std::string owned_stat_key;
  // The rule whose limit the response shows for this descriptor (set when the call finishes).
  const RateLimitRule* shown = nullptr;
};


absl::Status CheckSize(absl::string_view what, absl::string_view text, size_t max) {
  if (text.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", text.size(), " bytes (at most ", max, ")"));
  }
  return absl::OkStatus();
}

using RequestDescriptor = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;

// envoyproxy/ratelimit's key of a request-supplied limit: "domain.key_value.key2".
std::string DescriptorStatKey(absl::string_view domain, const RequestDescriptor& d) {
  std::string key(domain);
  for (const auto& e : d.entries()) {
    absl::StrAppend(&key, ".", e.key());
    if (!e.value().empty()) {
      absl::StrAppend(&key, "_", e.value());
    }
  }
  return key;
}

// The stat key of a matched node, as envoyproxy/ratelimit's GetLimit names it, when it differs
// from node.full_key (the configured path); empty otherwise. detailed_metric names the
// request's values ("domain.k_v.k2_v2"); value_to_metric names a level by the request's value
// instead of the configured pattern or default; a share_threshold level is always named by
// its pattern.
std::string MatchedStatKey(absl::string_view domain, const RequestDescriptor& d,
                           const MatchSteps& steps, const DescriptorPlan& plan) {
  const DescriptorNode& node = *plan.node;
  const bool shared = !plan.shared_patterns.empty();
  std::string key(domain);
  if (node.detailed_metric) {
    for (int i = 0; i < d.entries_size(); ++i) {
      const auto& e = d.entries(i);
      absl::StrAppend(&key, ".", e.key());
      if (shared && !plan.shared_patterns[i].empty()) {
        absl::StrAppend(&key, "_", plan.shared_patterns[i]);
      } else if (!shared || !e.value().empty()) {
        // Upstream writes the '_' even for an empty value unless a pattern is shared.
        absl::StrAppend(&key, "_", e.value());
      }
    }
    return key;
  }
  bool differs = shared;
  for (const MatchStep& step : steps) {
    differs = differs || step.node->value_to_metric;
  }
  if (!differs) {
    return {};
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& e = d.entries(static_cast<int>(i));
    const MatchStep& step = steps[i];
    absl::string_view value;
    switch (step.how) {
      case MatchStep::How::kWildcard:
        value = shared && !plan.shared_patterns[i].empty() ? plan.shared_patterns[i]
                : step.node->value_to_metric              ? absl::string_view(e.value())
                                                          : absl::string_view(step.node->value);
        break;
      case MatchStep::How::kExact:
        value = e.value();
        break;
      case MatchStep::How::kDefault:
        value = step.node->value_to_metric ? absl::string_view(e.value()) : absl::string_view();
        break;
    }
    absl::StrAppend(&key, ".", e.key());
    if (!value.empty()) {
      absl::StrAppend(&key, "_", value);
    }
  }
  return key == node.full_key ? std::string() : key;
}

// What a rule can hold: the count limit of the windows, the burst of the buckets and GCRA.
uint64_t Capacity(const LimitParams& params) {
  switch (params.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
    case Algorithm::kGcra:
      return params.burst;
    default:
      return params.limit;
  }
}

// envoyproxy/ratelimit's per-rule accounting (base_limiter.go), on the usage before and after
// this request's hits: over_limit counts only the hits past the capacity, near_limit the hits
// between ratio x capacity and the capacity, shadow_mode as over_limit.
void CountDecision(RuleCounters& counters, const Decision& decision, const LimitParams& params,
                   uint64_t hits, double near_ratio, bool from_cache, bool shadow) {
  const uint64_t capacity = Capacity(params);
  // float, as upstream computes it, so thresholds on exact boundaries agree.
  const uint64_t near = static_cast<uint64_t>(
      std::floor(static_cast<double>(static_cast<float>(capacity) * static_cast<float>(near_ratio))));
  const uint64_t held = capacity > decision.remaining ? capacity - decision.remaining : 0;
  const auto add = [](prometheus::Counter* counter, uint64_t n) {
    if (n > 0) {
      counter->Increment(static_cast<double>(n));
    }
  };
  add(counters.total_hits, hits);
  if (decision.allowed) {
    const uint64_t after = held;
    const uint64_t before = after > hits ? after - hits : 0;
    add(counters.within_limit, hits);
    if (after > near) {
      add(counters.near_limit, before >= near ? hits : after - near);
    }
    return;
  }
  if (from_cache) {
    add(counters.over_limit, hits);
    add(counters.over_limit_with_local_cache, hits);
    if (shadow) {
      add(counters.shadow_mode, hits);
    }
    return;
  }
  const uint64_t before = held;
  const uint64_t after = before + hits < before ? std::numeric_limits<uint64_t>::max()
                                                : before + hits;
  const uint64_t over = before >= capacity ? hits : after - capacity;
  add(counters.over_limit, over);
  if (before < capacity) {
    add(counters.near_limit, capacity - std::max(near, before));
  }
  if (shadow) {
    add(counters.shadow_mode, over);
  }
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

// Co-location: when the keys of every descriptor of the request share one hash tag (rules with
// the same `hash_tag` entry) and are distinct, the whole request is one group, decided
// all-or-nothing by one script call. Shadow-mode descriptors never join: their denial must
// not stop the others from consuming. Otherwise descriptors stay independent, as in
// envoyproxy/ratelimit.
void CoLocate(const std::vector<DescriptorPlan>& plans, std::vector<LimitCheck>& checks) {
  size_t descriptors = 0;
  bool have_tag = false;
  std::string_view tag;
  for (const DescriptorPlan& plan : plans) {
    if (plan.rules.empty()) {
      continue;
    }
    if (plan.node != nullptr && plan.node->shadow_mode) {
      return;
    }
    ++descriptors;
    for (size_t c = plan.first_check; c < plan.first_check + plan.rules.size(); ++c) {
      const std::string_view t = HashTagOf(StdView(checks[c].key));
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
  // What answers the checks the backend cannot decide: the domain's mode, else the flag's.
  FailureMode failure_mode = FailureMode::kAllow;
  std::vector<DescriptorPlan> plans;
  std::vector<RateLimitRule> overrides;  // storage for request-supplied limits
  std::vector<std::string> keys;
  // One per rule of each plan, in plan order; keys point into `keys`.
  std::vector<LimitCheck> checks;
  // Per check: its decision, and whether one was made (by the cache or the backend).
  std::vector<Decision> decisions;
  std::vector<bool> known;
  std::vector<bool> from_cache;  // answered by the over-limit cache
  // The failure_mode local fallback decided every check the backend did not (all but those
  // from the cache: a failed batch leaves each of its checks undecided).
  bool decided_locally = false;
  // While the backend decides: the backend's callback and ShouldRateLimit's frame hold the
  // call (see LetGo); the backend's status, for Finish.
  std::atomic<int> holders{0};
  absl::Status status;
  // Checks sent to the backend, by index, when the cache answered some of them.
  std::vector<size_t> remote_index;
  // --response_dynamic_metadata: the request's part, built while the request is alive.
  google::protobuf::Struct request_metadata;
  Response* response = nullptr;
  RateLimiter::DoneCallback done;
};

RateLimiter::RateLimiter(const ConfigStore& config, Backend& backend, const Clock& clock,
                         Metrics& metrics, RateLimiterOptions options, OverLimitCache* cache)
    : config_(config),
      backend_(backend),
      metrics_(metrics),
      options_(std::move(options)),
      cache_(cache),
      local_(clock, options_.replicas_hint,
             MemoryBackendOptions{.max_keys = std::max<size_t>(1, options_.local_max_keys)}) {}

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
  if (call->config == nullptr) {
    metrics_.CountRequest("unavailable");
    std::move(done)(absl::UnavailableError("no rate limit configuration loaded yet"));
    return;
  }
  call->response = response;
  call->done = std::move(done);
  if (options_.response_dynamic_metadata) {
    DescribeRequest(request, &call->request_metadata);
  }
  const Config& config = *call->config;
  const std::string& domain = request.domain();
  const Domain* configured = config.FindDomain(domain);
  const bool known_domain = configured != nullptr;
  call->failure_mode = known_domain && configured->failure_mode.has_value()
                           ? *configured->failure_mode
                           : options_.failure_mode;
  const uint64_t request_hits = request.hits_addend() == 0 ? 1 : request.hits_addend();
  const int n = request.descriptors_size();
  call->plans.resize(n);
  call->overrides.reserve(n);

  // Resolve each descriptor; collect the names that matched rules replace (unlimited rules'
  // too: envoyproxy/ratelimit collects replacements before it sets unlimited ones aside).
  absl::InlinedVector<DescriptorEntryView, 8> entries;
  MatchSteps steps;
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
      rule.key_suffix = RuleKeySuffix(Algorithm::kFixedWindow, UnitSeconds(rule.unit));
      plan.rules.push_back(&rule);
      plan.owned_stat_key = DescriptorStatKey(domain, d);
      plan.stat_key = plan.owned_stat_key;
      continue;
    }
    entries.clear();
    for (const auto& e : d.entries()) {
      entries.push_back({e.key(), e.value()});
    }
    const DescriptorNode* node = config.Match(domain, entries, &steps);
    if (node == nullptr) {
      continue;
    }
    plan.node = node;
    for (size_t level = 0; level < steps.size(); ++level) {
      if (steps[level].how == MatchStep::How::kWildcard && steps[level].node->share_threshold) {
        plan.shared_patterns.resize(steps.size());
        plan.shared_patterns[level] = steps[level].node->value;  // lives with the config
      }
    }
    plan.owned_stat_key = MatchedStatKey(domain, d, steps, plan);
    plan.stat_key = plan.owned_stat_key.empty() ? absl::string_view(node->full_key)
                                                : absl::string_view(plan.owned_stat_key);
    for (const RateLimitRule& rule : node->rules) {
      for (const std::string& name : rule.replaces) {
        replaced.insert(name);
      }
      if (rule.unlimited) {
        plan.unlimited = true;
        continue;
      }
      plan.rules.push_back(&rule);
    }
  }

  // Drop replaced rules, then build one check per remaining rule.
  std::vector<LimitCheck>& checks = call->checks;
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
    for (int e = 0; e < d.entries_size(); ++e) {
      const auto& entry = d.entries(e);
      if (!plan.shared_patterns.empty() && !plan.shared_patterns[e].empty()) {
        entries.push_back({entry.key(), plan.shared_patterns[e], /*shared_pattern=*/true});
      } else {
        entries.push_back({entry.key(), entry.value()});
      }
    }
    for (const RateLimitRule* rule : plan.rules) {
      call->keys.push_back(
          StorageKey(options_.key_prefix, domain, entries, rule->key_suffix, rule->hash_tag));
      LimitParams params = rule->params;
      params.count_denied = options_.count_denied_hits;
      checks.push_back(LimitCheck{{}, params, plan.hits, static_cast<uint32_t>(i)});
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
  call->from_cache.assign(checks.size(), false);
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
        call->from_cache[c] = true;
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
  // The checks belong to the call (the local fallback needs them after a failure), and the
  // backend reads them until Evaluate returns, which may be after `done` has run on another
  // thread. So the call has two holders, the callback and this frame; the last to let go
  // finishes it.
  PendingCall* held = call.release();
  held->holders.store(2, std::memory_order_relaxed);
  backend_.Evaluate(all_remote ? absl::MakeConstSpan(held->checks) : absl::MakeConstSpan(remote),
                    [this, all_remote, held](absl::Status status,
                                             absl::Span<const Decision> decisions) {
                      if (status.ok()) {
                        for (size_t r = 0; r < decisions.size(); ++r) {
                          size_t c = all_remote ? r : held->remote_index[r];
                          held->decisions[c] = decisions[r];
                          held->known[c] = true;
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

void RateLimiter::DecideLocally(PendingCall& call) {
  // Each undecided check, scaled to this replica's share of its rule, keeps its key and group.
  size_t undecided = 0;
  for (const DescriptorPlan& plan : call.plans) {
    for (size_t c = plan.first_check; c < plan.first_check + plan.rules.size(); ++c) {
      if (!call.known[c]) {
        call.checks[c].params =
            local_.Scale(call.checks[c].params, plan.rules[c - plan.first_check]->local_share);
        ++undecided;
      }
    }
  }
  if (undecided == 0) {
    return;
  }
  call.decided_locally = true;
  if (undecided == call.checks.size()) {
    local_.Decide(call.checks, &call.decisions);
    call.known.assign(call.checks.size(), true);
    return;
  }
  // Some checks were answered by the over-limit cache: decide only the others, which must not
  // consume again what the cache already denied. (Rare: a cached key and an uncached one in one
  // request during an outage; only then does the fallback allocate here.)
  std::vector<LimitCheck> subset;
  std::vector<size_t> index;
  subset.reserve(undecided);
  index.reserve(undecided);
  for (size_t c = 0; c < call.checks.size(); ++c) {
    if (!call.known[c]) {
      subset.push_back(call.checks[c]);
      index.push_back(c);
    }
  }
  std::vector<Decision> decisions;
  local_.Decide(subset, &decisions);
  for (size_t i = 0; i < index.size(); ++i) {
    call.decisions[index[i]] = decisions[i];
    call.known[index[i]] = true;
  }
}

void RateLimiter::Finish(std::unique_ptr<PendingCall> call, absl::Status status) {
  Response* response = call->response;
  if (!status.ok()) {
    metrics_.CountBackendFailure(FailureReasonOf(status));
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "backend " << backend_.Name() << " could not decide: " << status
        << "; answering by failure_mode=" << FailureModeName(call->failure_mode);
    if (call->failure_mode == FailureMode::kLocal) {
      DecideLocally(*call);
    }
  }
  // The overall code, as envoyproxy/ratelimit decides it: OVER_LIMIT if any descriptor not in
  // quota mode is over its limit, or if every quota-mode descriptor (there being one) is.
  size_t failed = 0;
  size_t quota_total = 0;
  size_t quota_failed = 0;
  int64_t retry_after_us = -1;        // the longest wait among failed descriptors
  int64_t quota_retry_after_us = -1;  // the shortest wait among failed quota descriptors
  int64_t delay_us = 0;
  absl::InlinedVector<size_t, 8> passed;  // descriptors answered OK (dynamic metadata)
  const std::vector<Decision>& decisions = call->decisions;
  for (size_t i = 0; i < call->plans.size(); ++i) {
    DescriptorPlan& plan = call->plans[i];
    auto* out = response->add_statuses();
    out->set_code(Response::OK);
    if (plan.unlimited && plan.rules.empty()) {
      out->set_limit_remaining(kUnlimitedRemaining);
      continue;
    }
    const bool quota = options_.global_quota_mode ||
                       (!plan.rules.empty() && plan.node != nullptr && plan.node->quota_mode);
    quota_total += quota ? 1 : 0;
    bool over = false;
    int64_t wait_us = -1;
    if (plan.rules.empty()) {
      passed.push_back(i);
      continue;
    }
    const size_t first = plan.first_check;
    const size_t end = first + plan.rules.size();
    const bool shadow = plan.node != nullptr && plan.node->shadow_mode;
    // A descriptor's checks are all cached (a lone rule) or all sent to the backend.
    const bool local = call->decided_locally && !call->from_cache[first];
    if (local) {
      metrics_.CountFailurePolicyDecision(FailureMode::kLocal);
    }
    if (!std::all_of(call->known.begin() + first, call->known.begin() + end,
                     [](bool k) { return k; })) {
      // The backend could not decide this descriptor: the failure policy answers.
      metrics_.CountFailurePolicyDecision(call->failure_mode);
      plan.shown = plan.rules.front();
      metrics_.CountDecision(plan.shown->params.algorithm, DecisionOutcome::kFailurePolicy);
      FillLimit(*plan.shown, out->mutable_current_limit());
      if (call->failure_mode == FailureMode::kDeny && !shadow) {
        out->set_code(Response::OVER_LIMIT);
        over = true;
      }
    } else {
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
      // A local denial is on this replica's share only: once the backend is back, the key may
      // well be under its limit there, so the cache must not answer for it.
      if (cache_ != nullptr && plan.rules.size() == 1 && denied && !local) {
        cache_->Remember(call->keys[first], plan.hits, decisions[first].retry_after_us);
      }
      const Decision& decision = decisions[chosen];
      const RateLimitRule& rule = *plan.rules[chosen - first];
      plan.shown = &rule;
      FillLimit(rule, out->mutable_current_limit());
      metrics_.CountDecision(rule.params.algorithm,
                             !denied                      ? DecisionOutcome::kWithinLimit
                             : shadow                     ? DecisionOutcome::kShadowMode
                             : call->from_cache[chosen]   ? DecisionOutcome::kOverLimitCached
                                                          : DecisionOutcome::kOverLimit);
      // The check's params: a local decision is measured against the scaled capacity.
      CountDecision(metrics_.ForRule(plan.stat_key), decision, call->checks[chosen].params,
                    plan.hits, options_.near_limit_ratio, call->from_cache[chosen], shadow);
      if (denied) {
        out->set_limit_remaining(0);
        // Over limit, the reset is when the request could succeed again: never earlier.
        *out->mutable_duration_until_reset() = ToDuration(decision.retry_after_us);
        if (!shadow) {
          out->set_code(Response::OVER_LIMIT);
          over = true;
          wait_us = decision.retry_after_us;
        }
      } else {
        out->set_limit_remaining(ClampRemaining(decision.remaining));
        *out->mutable_duration_until_reset() = ToDuration(decision.reset_after_us);
        for (size_t c = first; c < end; ++c) {
          delay_us = std::max(delay_us, decisions[c].delay_us);
        }
      }
    }
    if (!over) {
      passed.push_back(i);
    } else if (quota) {
      ++quota_failed;
      if (wait_us >= 0 && (quota_retry_after_us < 0 || wait_us < quota_retry_after_us)) {
        quota_retry_after_us = wait_us;
      }
    } else {
      ++failed;
      retry_after_us = std::max(retry_after_us, wait_us);
    }
  }
  const bool quota_exhausted = quota_total > 0 && quota_failed == quota_total;
  bool over_limit = failed > 0 || quota_exhausted;
  if (over_limit && options_.global_shadow_mode) {
    over_limit = false;
    metrics_.CountGlobalShadowMode();
  }
  response->set_overall_code(over_limit ? Response::OVER_LIMIT : Response::OK);
  if (!quota_exhausted) {
    quota_retry_after_us = -1;  // one quota descriptor left: quotas do not hold the request
  }
  retry_after_us = std::max(retry_after_us, quota_retry_after_us);
  if (over_limit && options_.retry_after_header && retry_after_us >= 0) {
    // Whole seconds, rounded up, so that a client retrying then is not rejected again.
    AddHeader(response, "retry-after", absl::StrCat((retry_after_us + 999999) / 1000000));
  }
  if (options_.rate_limit_headers || options_.ietf_rate_limit_headers) {
    AddRateLimitHeaders(*call, response);
  }
  if (options_.response_dynamic_metadata) {
    AddRequestMetadata(*call, passed, response);
  }
  if (delay_us > 0 && response->overall_code() == Response::OK) {
    (*response->mutable_dynamic_metadata()->mutable_fields())["sluice.delay_ms"]
        .set_number_value(static_cast<double>(delay_us) / 1000.0);
  }
  metrics_.CountRequest(response->overall_code() == Response::OK ? "ok" : "over_limit");
  std::move(call->done)(absl::OkStatus());
}

int RateLimiter::ClosestToLimit(const PendingCall& call, const Response& response) const {
  // envoyproxy/ratelimit's choice: the descriptor with a limit and the least remaining, or the
  // last one over its limit (quota-mode ones aside).
  int chosen = -1;
  uint32_t least = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < call.plans.size(); ++i) {
    const Response::DescriptorStatus& status = response.statuses(static_cast<int>(i));
    if (status.has_current_limit() && status.limit_remaining() < least) {
      chosen = static_cast<int>(i);
      least = status.limit_remaining();
    }
    const DescriptorPlan& plan = call.plans[i];
    const bool quota = options_.global_quota_mode || (plan.node != nullptr && plan.node->quota_mode);
    if (status.code() == Response::OVER_LIMIT && !quota) {
      chosen = static_cast<int>(i);
      least = 0;
    }
  }
  return chosen;
}

void RateLimiter::AddRateLimitHeaders(const PendingCall& call, Response* response) const {
  const int chosen = ClosestToLimit(call, *response);
  if (chosen < 0) {
    return;
  }
  const Response::DescriptorStatus& status = response->statuses(chosen);
  const std::string limit = absl::StrCat(status.current_limit().requests_per_unit());
  const std::string remaining = absl::StrCat(status.limit_remaining());
  const std::string reset = absl::StrCat(WholeSecondsUp(status.duration_until_reset()));
  if (options_.rate_limit_headers) {
    AddHeader(response, options_.limit_header, limit);
    AddHeader(response, options_.remaining_header, remaining);
    AddHeader(response, options_.reset_header, reset);
  }
  const DescriptorPlan& plan = call.plans[static_cast<size_t>(chosen)];
  if (options_.ietf_rate_limit_headers && plan.shown != nullptr) {
    // draft-ietf-httpapi-ratelimit-headers (-09/-10): one quota policy item, named by the
    // rule's name or else its stat key, in both fields.
    const std::string name =
        SfString(plan.shown->name.empty() ? plan.stat_key : absl::string_view(plan.shown->name));
    AddHeader(response, "RateLimit-Policy",
              absl::StrCat(name, ";q=", limit, ";w=", plan.shown->params.period_us / 1000000));
    AddHeader(response, "RateLimit", absl::StrCat(name, ";r=", remaining, ";t=", reset));
  }
}

void RateLimiter::DescribeRequest(const Request& request, google::protobuf::Struct* out) {
  // envoyproxy/ratelimit's layout: domain, descriptors (entries as "key=value", the limit
  // override and hits_addend when given) and the request's hitsAddend when not 0.
  auto& fields = *out->mutable_fields();
  fields["domain"].set_string_value(request.domain());
  auto* descriptors = fields["descriptors"].mutable_list_value();
  for (const auto& d : request.descriptors()) {
    auto& described = *descriptors->add_values()->mutable_struct_value()->mutable_fields();
    auto* list = described["entries"].mutable_list_value();
    for (const auto& e : d.entries()) {
      list->add_values()->set_string_value(absl::StrCat(e.key(), "=", e.value()));
    }
    if (d.has_limit()) {
      described["limit"].set_string_value(d.limit().ShortDebugString());
    }
    if (d.has_hits_addend()) {
      described["hitsAddend"].set_number_value(static_cast<double>(d.hits_addend().value()));
    }
  }
  if (request.hits_addend() != 0) {
    fields["hitsAddend"].set_number_value(static_cast<double>(request.hits_addend()));
  }
}

void RateLimiter::AddRequestMetadata(PendingCall& call, absl::Span<const size_t> passed,
                                     Response* response) const {
  // The request's part, then the merged `metadata` of the descriptors that passed.
  auto& fields = *response->mutable_dynamic_metadata()->mutable_fields();
  for (auto& [name, value] : *call.request_metadata.mutable_fields()) {
    fields[name] = std::move(value);
  }
  google::protobuf::Struct merged;
  for (size_t i : passed) {
    const DescriptorPlan& plan = call.plans[i];
    if (!plan.rules.empty() && plan.node != nullptr && plan.node->metadata != nullptr) {
      MergeMetadata(*plan.node->metadata, &merged);
    }
  }
  if (!merged.fields().empty()) {
    *fields["metadata"].mutable_struct_value() = std::move(merged);
  }
}

}  // namespace sluice
