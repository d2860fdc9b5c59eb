#include "server/config/config.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/config/config_description.h"
#include "server/config/wildcard.h"

namespace sluice {

int64_t UnitSeconds(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return 1;
    case TimeUnit::kMinute:
      return 60;
    case TimeUnit::kHour:
      return 3600;
    case TimeUnit::kDay:
      return 86400;
    case TimeUnit::kWeek:
      return 7 * 86400;
    case TimeUnit::kMonth:
      return 30 * 86400;
    case TimeUnit::kYear:
      return 365 * 86400;
  }
  return 1;  // unreachable for a valid enumerator
}

absl::string_view UnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return "second";
    case TimeUnit::kMinute:
      return "minute";
    case TimeUnit::kHour:
      return "hour";
    case TimeUnit::kDay:
      return "day";
    case TimeUnit::kWeek:
      return "week";
    case TimeUnit::kMonth:
      return "month";
    case TimeUnit::kYear:
      return "year";
  }
  return "unknown";
}

namespace {

// Long enough for nearly every real "key_value"; longer ones fall back to the heap.
constexpr size_t kCompositeBufferSize = 256;

// A request entry's "key_value" (envoyproxy/ratelimit's finalKey, "key_" for an empty value),
// built at the first call.
class CompositeText {
 public:
  explicit CompositeText(const DescriptorEntryView& entry) : entry_(entry) {}
  CompositeText(const CompositeText&) = delete;
  CompositeText& operator=(const CompositeText&) = delete;

  absl::string_view Get() {
    if (text_.data() != nullptr) {
      return text_;
    }
    const size_t size = entry_.key.size() + 1 + entry_.value.size();
    if (size <= sizeof(buffer_)) {
      std::memcpy(buffer_, entry_.key.data(), entry_.key.size());
      buffer_[entry_.key.size()] = '_';
      if (!entry_.value.empty()) {
        std::memcpy(buffer_ + entry_.key.size() + 1, entry_.value.data(), entry_.value.size());
      }
      text_ = absl::string_view(buffer_, size);
    } else {
      heap_ = absl::StrCat(entry_.key, "_", entry_.value);
      text_ = heap_;
    }
    return text_;
  }

 private:
  const DescriptorEntryView& entry_;
  char buffer_[kCompositeBufferSize];
  std::string heap_;
  absl::string_view text_;
};

}  // namespace

absl::string_view WildcardLevelText(const DescriptorNode& node, absl::string_view entry_key) {
  if (!node.key_wildcard) {
    return node.value;
  }
  absl::string_view pattern = node.composite_pattern;
  if (pattern.size() > entry_key.size() && absl::StartsWith(pattern, entry_key) &&
      pattern[entry_key.size()] == '_') {
    pattern.remove_prefix(entry_key.size() + 1);
  }
  return pattern;
}

const DescriptorNode* Config::FindChild(const DescriptorNode& node,
                                        const DescriptorEntryView& entry, MatchStep::How* how) {
  CompositeText composite(entry);
  if (!node.exact_children.empty() && !entry.value.empty()) {
    auto it = node.exact_children.find(composite.Get());
    // The key check keeps ("a", "b_c") from selecting a child declared as ("a_b", "c"): the
    // composite string alone cannot tell them apart.
    if (it != node.exact_children.end() && it->second->key == entry.key) {
      *how = MatchStep::How::kExact;
      return it->second.get();
    }
  }
  for (const std::unique_ptr<DescriptorNode>& child : node.wildcard_children) {
    const bool matches = child->key_wildcard
                             ? WildcardMatch(child->composite_pattern, composite.Get())
                             : child->key == entry.key && WildcardMatch(child->value, entry.value);
    if (matches) {
      *how = MatchStep::How::kWildcard;
      return child.get();
    }
  }
  auto it = node.default_children.find(entry.key);
  if (it != node.default_children.end()) {
    *how = MatchStep::How::kDefault;
    return it->second.get();
  }
  return nullptr;
}

namespace {

// Children of `node` in declaration order (by file, then line).
std::vector<const DescriptorNode*> OrderedChildren(const DescriptorNode& node) {
  std::vector<const DescriptorNode*> children;
  children.reserve(node.exact_children.size() + node.default_children.size() +
                   node.wildcard_children.size());
  for (const auto& [name, child] : node.exact_children) {
    children.push_back(child.get());
  }
  for (const auto& [name, child] : node.default_children) {
    children.push_back(child.get());
  }
  for (const auto& child : node.wildcard_children) {
    children.push_back(child.get());
  }
  std::sort(children.begin(), children.end(),
            [](const DescriptorNode* a, const DescriptorNode* b) {
              if (a->file != b->file) {
                return a->file < b->file;  // domains merged from several files
              }
              if (a->line != b->line) {
                return a->line < b->line;
              }
              return a->full_key < b->full_key;
            });
  return children;
}

void DumpRule(const DescriptorNode& node, const RateLimitRule& rule, std::string& out) {
  absl::StrAppend(&out, node.full_key, ":");
  if (rule.unlimited) {
    absl::StrAppend(&out, " unlimited");
  } else {
    absl::StrAppend(&out, " requests_per_unit=", rule.requests_per_unit,
                    " unit=", UnitName(rule.unit));
    if (rule.unit_multiplier != 1) {
      absl::StrAppend(&out, " unit_multiplier=", rule.unit_multiplier);
    }
    absl::StrAppend(&out, " algorithm=", AlgorithmName(rule.params.algorithm));
    switch (rule.params.algorithm) {
      case Algorithm::kTokenBucket:
      case Algorithm::kLeakyBucket:
      case Algorithm::kGcra:
        absl::StrAppend(&out, " burst=", rule.params.burst);
        break;
      case Algorithm::kConcurrency:
        // requests_per_unit and unit read differently here: say how.
        // A denied acquisition holds a lease (charge always, concurrency's default: Resolve)
        // so that Envoy's release of it balances, unless the rule says `charge: if_admitted`.
        absl::StrAppend(&out, " (at most ", rule.requests_per_unit,
                        " in flight; a lease not released lapses after ",
                        rule.unit_multiplier == 1 ? "one" : absl::StrCat(rule.unit_multiplier),
                        " ", UnitName(rule.unit), rule.unit_multiplier == 1 ? "" : "s",
                        rule.charge.value_or(Charge::kAlways) == Charge::kAlways
                            ? "; a denied acquisition holds one until its release)"
                            : "; a denied acquisition holds none)");
        break;
      default:
        break;
    }
    absl::StrAppend(&out, " key_suffix=", rule.key_suffix);
    if (rule.local_share.has_value()) {
      absl::StrAppend(&out, " local_share=", *rule.local_share);
    }
    if (rule.charge.has_value()) {
      absl::StrAppend(&out, " charge=", ChargeName(*rule.charge));
    }
  }
  if (!rule.name.empty()) {
    absl::StrAppend(&out, " name=", rule.name);
  }
  if (!rule.replaces.empty()) {
    absl::StrAppend(&out, " replaces=", absl::StrJoin(rule.replaces, ","));
  }
  absl::StrAppend(&out, " shadow_mode=", node.shadow_mode ? "true" : "false");
  if (node.quota_mode) {
    absl::StrAppend(&out, " quota_mode=true");
  }
  if (node.detailed_metric) {
    absl::StrAppend(&out, " detailed_metric=true");
  }
  if (node.value_to_metric) {
    absl::StrAppend(&out, " value_to_metric=true");
  }
  if (node.share_threshold) {
    absl::StrAppend(&out, " share_threshold=true");
  }
  if (node.metadata != nullptr) {
    absl::StrAppend(&out, " metadata=", node.metadata->ShortDebugString());
  }
  absl::StrAppend(&out, " (", ConfigLocation(node.file, node.line), ")\n");
}

void DumpNode(const DescriptorNode& node, std::string& out) {
  for (const RateLimitRule& rule : node.rules) {
    DumpRule(node, rule, out);
  }
  for (const DescriptorNode* child : OrderedChildren(node)) {
    DumpNode(*child, out);
  }
}

size_t CountNodesWithRules(const DescriptorNode& node) {
  size_t count = node.rules.empty() ? 0 : 1;
  for (const auto& [name, child] : node.exact_children) {
    count += CountNodesWithRules(*child);
  }
  for (const auto& [name, child] : node.default_children) {
    count += CountNodesWithRules(*child);
  }
  for (const auto& child : node.wildcard_children) {
    count += CountNodesWithRules(*child);
  }
  return count;
}

}  // namespace

const DescriptorNode* Config::Match(absl::string_view domain,
                                    absl::Span<const DescriptorEntryView> entries,
                                    MatchSteps* steps) const {
  auto it = domains_.find(domain);
  if (it == domains_.end()) {
    if (steps != nullptr) {
      steps->clear();
    }
    return nullptr;
  }
  return Match(*it->second, entries, steps);
}

const DescriptorNode* Config::Match(const Domain& domain,
                                    absl::Span<const DescriptorEntryView> entries,
                                    MatchSteps* steps) {
  if (steps != nullptr) {
    steps->clear();
  }
  if (entries.empty()) {
    return nullptr;
  }
  const DescriptorNode* node = &domain.root;
  for (const DescriptorEntryView& entry : entries) {
    // No backtracking: once a child is chosen, a dead end below it means no limit, even if a
    // wildcard or default sibling would have led further (envoyproxy/ratelimit does the same).
    MatchStep::How how = MatchStep::How::kExact;
    node = FindChild(*node, entry, &how);
    if (node == nullptr) {
      return nullptr;
    }
    if (steps != nullptr) {
      steps->push_back(MatchStep{node, how});
    }
  }
  // Rules on a node passed before the last entry never apply: depth must match exactly.
  return node->rules.empty() ? nullptr : node;
}

bool Config::HasDomain(absl::string_view domain) const { return domains_.contains(domain); }

const Domain* Config::FindDomain(absl::string_view domain) const {
  auto it = domains_.find(domain);
  return it == domains_.end() ? nullptr : it->second.get();
}

const std::string& Config::Dump() const {
  std::call_once(dump_once_, [this] { dump_ = BuildDump(); });
  return dump_;
}

std::string Config::BuildDump() const {
  std::vector<const Domain*> domains;
  domains.reserve(domains_.size());
  for (const auto& [name, domain] : domains_) {
    domains.push_back(domain.get());
  }
  std::sort(domains.begin(), domains.end(),
            [](const Domain* a, const Domain* b) { return a->name < b->name; });
  std::string out;
  for (const Domain* domain : domains) {
    if (domain->failure_mode.has_value()) {
      absl::StrAppend(&out, domain->name, ": failure_mode=", FailureModeName(*domain->failure_mode),
                      " (", domain->failure_mode_at, ")\n");
    }
    DumpNode(domain->root, out);
  }
  return out;
}

size_t Config::RuleCount() const {
  size_t count = 0;
  for (const auto& [name, domain] : domains_) {
    count += CountNodesWithRules(domain->root);
  }
  return count;
}

}  // namespace sluice
