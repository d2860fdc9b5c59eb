#include "server/service/resolve.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/common/std_view.h"
#include "server/key/storage_key.h"
#include "server/redis/cluster/hash_slot.h"

namespace sluice {
namespace {

using Request = envoy::service::ratelimit::v3::RateLimitRequest;
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
// its pattern. A level a key wildcard matched is named by the request's key and the pattern
// (WildcardLevelText), which the configured path does not say.
std::string MatchedStatKey(absl::string_view domain, const RequestDescriptor& d,
                           const MatchSteps& steps, const DescriptorPlan& plan) {
  const DescriptorNode& node = *plan.node;
  const bool shared = !plan.shared_patterns.empty();
  bool differs = shared || node.detailed_metric;
  for (const MatchStep& step : steps) {
    differs = differs || step.node->value_to_metric ||
              (step.how == MatchStep::How::kWildcard && step.node->key_wildcard);
  }
  if (!differs) {
    return {};
  }
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
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& e = d.entries(static_cast<int>(i));
    const MatchStep& step = steps[i];
    absl::string_view value;
    switch (step.how) {
      case MatchStep::How::kWildcard:
        value = shared && !plan.shared_patterns[i].empty() ? plan.shared_patterns[i]
                : step.node->value_to_metric              ? absl::string_view(e.value())
                                                          : WildcardLevelText(*step.node, e.key());
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

// A limit supplied by the caller replaces the configured one (envoyproxy/ratelimit's override):
// a fixed window of requests_per_unit per unit, never in shadow mode. Its key names its limit,
// so that two overrides of different limits on one descriptor never share a counter (erpc#1058).
RateLimitRule OverrideRule(const RequestDescriptor& d) {
  RateLimitRule rule;
  rule.requests_per_unit = d.limit().requests_per_unit();
  rule.unit = static_cast<TimeUnit>(d.limit().unit());
  rule.params.algorithm = Algorithm::kFixedWindow;
  rule.params.limit = rule.requests_per_unit;
  rule.params.period_us = UnitSeconds(rule.unit) * 1000000;
  rule.params.burst = rule.requests_per_unit;
  rule.key_suffix = OverrideKeySuffix(UnitSeconds(rule.unit), rule.requests_per_unit);
  return rule;
}

// Scratch space reused across the descriptors of one request.
struct Scratch {
  absl::InlinedVector<DescriptorEntryView, 8> entries;
  MatchSteps steps;
  // Names that matched rules replace (unlimited rules' too: envoyproxy/ratelimit collects
  // replacements before it sets unlimited ones aside).
  absl::flat_hash_set<absl::string_view> replaced;
  // Per check, where its key lies in RequestPlan::key_bytes (views are taken once it is full).
  absl::InlinedVector<std::pair<uint32_t, uint32_t>, 8> key_spans;
};

// Matches descriptor `d` of a known domain into `out`: its node, rules (before replaces), shared
// patterns and stat key. REQUIRES: scratch.entries holds d's entries.
void MatchDescriptor(const Domain& configured, absl::string_view domain,
                     const RequestDescriptor& d, Scratch& scratch, DescriptorPlan& out) {
  const DescriptorNode* node = Config::Match(configured, scratch.entries, &scratch.steps);
  if (node == nullptr) {
    return;
  }
  out.node = node;
  const MatchSteps& steps = scratch.steps;
  for (size_t level = 0; level < steps.size(); ++level) {
    if (steps[level].how == MatchStep::How::kWildcard && steps[level].node->share_threshold) {
      out.shared_patterns.resize(steps.size());
      // Lives with the config.
      out.shared_patterns[level] =
          WildcardLevelText(*steps[level].node, d.entries(static_cast<int>(level)).key());
    }
  }
  out.owned_stat_key = MatchedStatKey(domain, d, steps, out);
  out.stat_key = out.owned_stat_key.empty() ? absl::string_view(node->full_key)
                                            : absl::string_view(out.owned_stat_key);
  for (const RateLimitRule& rule : node->rules) {
    for (const std::string& name : rule.replaces) {
      scratch.replaced.insert(name);
    }
    if (rule.unlimited) {
      out.unlimited = true;
      continue;
    }
    out.rules.push_back(&rule);
  }
}

// The charge of a rule without its own `charge:`. An in-flight limit charges always, whatever
// --default_charge says: Envoy sends the release (apply_on_stream_done) when every request ends,
// the denied ones included (envoyproxy/envoy, source/extensions/filters/http/ratelimit/
// ratelimit.cc, Filter::onDestroy), so a denied acquisition must hold a lease for its release to
// give back, or that release frees a lease another request holds.
Charge DefaultCharge(Algorithm algorithm, const ResolveOptions& options) {
  switch (algorithm) {
    case Algorithm::kConcurrency:
      return Charge::kAlways;
    case Algorithm::kFixedWindow:
      return options.default_charge_fixed_window.value_or(options.default_charge);
    default:
      return options.default_charge;
  }
}

// Drops the replaced rules of `descriptor` and appends one check (and its storage key) per
// remaining rule.
void AddChecks(const RequestDescriptor& d, uint32_t index, const ResolveOptions& options,
               absl::string_view domain, Scratch& scratch, DescriptorPlan& descriptor,
               RequestPlan& plan) {
  if (!scratch.replaced.empty()) {
    descriptor.rules.erase(
        std::remove_if(descriptor.rules.begin(), descriptor.rules.end(),
                       [&](const RateLimitRule* r) {
                         return !r->name.empty() && scratch.replaced.contains(r->name);
                       }),
        descriptor.rules.end());
  }
  descriptor.first_check = plan.checks.size();
  if (descriptor.rules.empty()) {
    return;
  }
  const auto& shared = descriptor.shared_patterns;
  scratch.entries.clear();
  for (int e = 0; e < d.entries_size(); ++e) {
    const auto& entry = d.entries(e);
    if (!shared.empty() && !shared[static_cast<size_t>(e)].empty()) {
      scratch.entries.push_back({entry.key(), shared[static_cast<size_t>(e)],
                                 /*shared_pattern=*/true});
    } else {
      scratch.entries.push_back({entry.key(), entry.value()});
    }
  }
  for (const RateLimitRule* rule : descriptor.rules) {
    const size_t offset = plan.key_bytes.size();
    AppendStorageKey(options.key_prefix, domain, scratch.entries, rule->key_suffix,
                     rule->hash_tag, &plan.key_bytes);
    scratch.key_spans.emplace_back(static_cast<uint32_t>(offset),
                                   static_cast<uint32_t>(plan.key_bytes.size() - offset));
    LimitParams params = rule->params;
    params.charge = rule->charge.value_or(DefaultCharge(params.algorithm, options));
    params.calendar_months = options.calendar_months &&
                             params.algorithm == Algorithm::kFixedWindow &&
                             rule->unit == TimeUnit::kMonth;
    if (descriptor.refund && params.algorithm == Algorithm::kConcurrency) {
      plan.releases_leases = true;
    }
    plan.checks.push_back(LimitCheck{{}, params, descriptor.hits, index, descriptor.refund});
  }
}

// Co-location: when every descriptor of the request asks for it (each of its rules names a
// `hash_tag`) and their keys share one hash tag and are distinct, the whole request is one group,
// decided all-or-nothing by one script call. Shadow-mode descriptors never join: their denial
// must not stop the others from consuming. Otherwise descriptors stay independent, as in
// envoyproxy/ratelimit: the same entries sent twice with different limits (overrides) share a
// hash tag by default, yet are two descriptors.
void CoLocate(absl::Span<const DescriptorPlan> plans, PlanChecks& checks) {
  size_t descriptors = 0;
  for (const DescriptorPlan& plan : plans) {
    if (plan.rules.empty()) {
      continue;
    }
    if (plan.node != nullptr && plan.node->shadow_mode) {
      return;
    }
    for (const RateLimitRule* rule : plan.rules) {
      if (rule->hash_tag.empty()) {
        return;
      }
    }
    ++descriptors;
  }
  if (descriptors < 2) {
    return;
  }
  bool have_tag = false;
  std::string_view tag;
  for (const DescriptorPlan& plan : plans) {
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

void DescribeRequest(const Request& request, google::protobuf::Struct* out) {
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

}  // namespace

void Resolve(const Request& request, std::shared_ptr<const Config> config,
             const ResolveOptions& options, RequestPlan* plan) {
  plan->config = std::move(config);
  if (options.describe_request) {
    DescribeRequest(request, &plan->request_metadata);
  }
  const std::string& domain = request.domain();
  const Domain* configured = plan->config->FindDomain(domain);
  plan->failure_mode = configured != nullptr && configured->failure_mode.has_value()
                           ? *configured->failure_mode
                           : options.failure_mode;
  const uint64_t request_hits = request.hits_addend() == 0 ? 1 : request.hits_addend();
  const int n = request.descriptors_size();
  if (options.refuse_all_refunds || !options.refuse_refunds_in.empty()) {
    for (int i = 0; i < n; ++i) {
      if (request.descriptors(i).is_negative_hits() &&
          (options.refuse_all_refunds || options.refuse_refunds_in.contains(domain))) {
        plan->refused_refund = i;
        return;
      }
    }
  }
  plan->descriptors.resize(static_cast<size_t>(n));
  // Descriptor plans point into `overrides`: it must not grow once filled (and most requests
  // have none, so it allocates only for those that do).
  const auto with_limit = std::count_if(request.descriptors().begin(),
                                        request.descriptors().end(),
                                        [](const RequestDescriptor& d) { return d.has_limit(); });
  plan->overrides.reserve(static_cast<size_t>(with_limit));
  Scratch scratch;
  // One reservation for every key (a guess when values need escapes or rules are replaced).
  size_t key_bytes = 0;
  for (int i = 0; i < n; ++i) {
    const RequestDescriptor& d = request.descriptors(i);
    DescriptorPlan& descriptor = plan->descriptors[static_cast<size_t>(i)];
    descriptor.hits = d.has_hits_addend() ? d.hits_addend().value() : request_hits;
    descriptor.refund = d.is_negative_hits();
    // An override carries its whole limit, so it is enforced in a domain the config does not
    // know (Envoy's static limit overrides, envoyproxy/envoy#45622), where upstream ignores it.
    if (configured == nullptr && !d.has_limit()) {
      continue;
    }
    scratch.entries.clear();
    for (const auto& e : d.entries()) {
      scratch.entries.push_back({e.key(), e.value()});
    }
    if (d.has_limit()) {
      descriptor.rules.push_back(&plan->overrides.emplace_back(OverrideRule(d)));
      descriptor.owned_stat_key = DescriptorStatKey(domain, d);
      descriptor.stat_key = descriptor.owned_stat_key;
    } else {
      MatchDescriptor(*configured, domain, d, scratch, descriptor);
    }
    for (const RateLimitRule* rule : descriptor.rules) {
      key_bytes += StorageKeySizeHint(options.key_prefix, domain, scratch.entries,
                                      rule->key_suffix);
    }
  }
  plan->key_bytes.reserve(key_bytes);
  for (int i = 0; i < n; ++i) {
    AddChecks(request.descriptors(i), static_cast<uint32_t>(i), options, domain, scratch,
              plan->descriptors[static_cast<size_t>(i)], *plan);
  }
  for (size_t c = 0; c < plan->checks.size(); ++c) {
    const auto [offset, size] = scratch.key_spans[c];
    plan->checks[c].key = absl::string_view(plan->key_bytes).substr(offset, size);
  }
  CoLocate(plan->descriptors, plan->checks);
}

}  // namespace sluice
