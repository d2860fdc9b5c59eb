#include "server/config/config_validator.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/config/failure_mode.h"
#include "server/config/rule_validator.h"
#include "server/config/wildcard.h"

namespace sluice {
namespace {

constexpr absl::string_view kFailureModeChoices = "allow, deny or local";

// Builds one description's Domain: its name and failure_mode, and its descriptor tree, checked
// in the order the description gives them.
class DomainBuilder {
 public:
  // Warnings (see Config::warnings) are appended to `warnings`.
  DomainBuilder(absl::string_view source, std::vector<std::string>& warnings,
                absl::string_view fixed_windows_only = {})
      : source_(source), warnings_(warnings), fixed_windows_only_(fixed_windows_only) {}

  absl::StatusOr<std::unique_ptr<Domain>> Build(DomainDescription& description);

 private:
  absl::Status Error(int line, absl::string_view path, absl::string_view what) const {
    return ConfigError(source_, line, path, what);
  }

  absl::Status SetFailureMode(const Field<std::string>& mode, Domain& domain) const;
  // Adds the descriptors of `list` (at `path`, `depth` levels below the domain) under `parent`.
  absl::Status AddDescriptors(Field<std::vector<DescriptorDescription>>& list,
                              const std::string& path, int depth, DescriptorNode& parent);
  absl::Status AddDescriptor(DescriptorDescription& description, const std::string& path, int depth,
                             DescriptorNode& parent);
  // The node's own fields: key, value, flags, metadata.
  absl::Status SetNodeFields(DescriptorDescription& description, const std::string& path,
                             DescriptorNode& node) const;
  // Adds `child` to `parent`, refusing a second descriptor with the same key and value.
  absl::Status Attach(std::unique_ptr<DescriptorNode> child, const std::string& path,
                      DescriptorNode& parent, DescriptorNode*& attached);

  // Where `node` (attached) was given, for a message about a later duplicate of it.
  std::string Place(const DescriptorNode& node) const;

  // With a backend that keeps fixed windows only (ValidateOptions::fixed_windows_only): the
  // first rule of another algorithm, named with its file, line and path.
  absl::Status CheckBackendAlgorithms(const DescriptorDescription& description,
                                      const std::string& path,
                                      const std::vector<RateLimitRule>& rules) const;

  const std::string source_;
  std::vector<std::string>& warnings_;
  const std::string fixed_windows_only_;
  // Each wildcard descriptor attached so far, by parent and "key[_value]": siblings are
  // checked for duplicates by hash, not by a scan of all of them.
  absl::flat_hash_map<std::pair<const DescriptorNode*, std::string>, const DescriptorNode*>
      wildcards_;
  // The path of each descriptor attached from a source without lines (xDS), which messages give
  // instead of a line.
  absl::flat_hash_map<const DescriptorNode*, std::string> lineless_paths_;
};

absl::StatusOr<std::unique_ptr<Domain>> DomainBuilder::Build(DomainDescription& description) {
  Field<std::string>& name = description.domain;
  if (!name.given) {
    return Error(description.line, "domain", "missing (every file needs a non-empty domain)");
  }
  RETURN_IF_ERROR(name.read_error);
  if (name.value.empty()) {
    return Error(name.line, "domain", "must not be empty");
  }
  auto domain = std::make_unique<Domain>();
  domain->name = std::move(name.value);
  domain->file = source_;
  domain->root.full_key = domain->name;
  domain->root.file = source_;
  domain->root.line = name.line;
  RETURN_IF_ERROR(SetFailureMode(description.failure_mode, *domain));
  if (description.descriptors.given) {
    RETURN_IF_ERROR(AddDescriptors(description.descriptors, "descriptors", 1, domain->root));
  }
  return domain;
}

absl::Status DomainBuilder::SetFailureMode(const Field<std::string>& mode, Domain& domain) const {
  if (!mode.given) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(mode.read_error);
  const std::optional<FailureMode> parsed = ParseFailureMode(mode.value);
  if (!parsed.has_value()) {
    return Error(mode.line, "failure_mode",
                 absl::StrCat("invalid failure mode ", Quoted(mode.value), " (expected ",
                              kFailureModeChoices, ")"));
  }
  domain.failure_mode = *parsed;
  domain.failure_mode_at = ConfigLocation(source_, mode.line);
  return absl::OkStatus();
}

absl::Status DomainBuilder::AddDescriptors(Field<std::vector<DescriptorDescription>>& list,
                                           const std::string& path, int depth,
                                           DescriptorNode& parent) {
  RETURN_IF_ERROR(list.read_error);
  if (list.value.empty()) {
    return absl::OkStatus();
  }
  if (depth > kMaxDescriptorDepth) {
    return Error(
        list.line, path,
        absl::StrCat("descriptors nested more than ", kMaxDescriptorDepth, " levels deep"));
  }
  for (size_t i = 0; i < list.value.size(); ++i) {
    RETURN_IF_ERROR(list.value[i].read_error);
    RETURN_IF_ERROR(AddDescriptor(list.value[i], ItemPath(path, i), depth, parent));
  }
  return absl::OkStatus();
}

absl::Status DomainBuilder::AddDescriptor(DescriptorDescription& description,
                                          const std::string& path, int depth,
                                          DescriptorNode& parent) {
  auto node = std::make_unique<DescriptorNode>();
  node->file = source_;
  node->line = description.line;
  RETURN_IF_ERROR(SetNodeFields(description, path, *node));
  node->full_key = node->value.empty()
                       ? absl::StrCat(parent.full_key, ".", node->key)
                       : absl::StrCat(parent.full_key, ".", node->key, "_", node->value);
  RETURN_IF_ERROR(ValidateDescriptorRules(description, source_, path, warnings_, node->rules));
  RETURN_IF_ERROR(CheckBackendAlgorithms(description, path, node->rules));
  DescriptorNode* attached = nullptr;
  RETURN_IF_ERROR(Attach(std::move(node), path, parent, attached));
  if (description.descriptors.given) {
    RETURN_IF_ERROR(AddDescriptors(description.descriptors, FieldPath(path, "descriptors"),
                                   depth + 1, *attached));
  }
  return absl::OkStatus();
}

absl::Status DomainBuilder::CheckBackendAlgorithms(const DescriptorDescription& description,
                                                   const std::string& path,
                                                   const std::vector<RateLimitRule>& rules) const {
  if (fixed_windows_only_.empty()) {
    return absl::OkStatus();
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    const RateLimitRule& rule = rules[i];
    if (rule.unlimited || rule.params.algorithm == Algorithm::kFixedWindow) {
      continue;
    }
    const bool single = description.rate_limit.has_value();
    const RuleDescription& given = single ? *description.rate_limit
                                          : description.rate_limits.value[i];
    const std::string rule_path = single ? FieldPath(path, "rate_limit")
                                         : ItemPath(FieldPath(path, "rate_limits"), i);
    return ConfigError(
        source_, given.algorithm.given ? given.algorithm.line : given.line,
        FieldPath(rule_path, "algorithm"),
        absl::StrCat(AlgorithmName(rule.params.algorithm), " is not kept by --backend=",
                     fixed_windows_only_,
                     ": its one atomic operation is an increment, which keeps fixed windows "
                     "(as envoyproxy/ratelimit keeps them there); use fixed_window, or the "
                     "memory, redis or redis_cluster backend"));
  }
  return absl::OkStatus();
}

absl::Status DomainBuilder::SetNodeFields(DescriptorDescription& description,
                                          const std::string& path, DescriptorNode& node) const {
  Field<std::string>& key = description.key;
  if (!key.given) {
    return Error(description.line, FieldPath(path, "key"),
                 "missing (every descriptor needs a key)");
  }
  RETURN_IF_ERROR(key.read_error);
  if (key.value.empty()) {
    return Error(key.line, FieldPath(path, "key"), "must not be empty");
  }
  node.key = std::move(key.value);
  RETURN_IF_ERROR(description.value.read_error);
  node.value = std::move(description.value.value);
  for (auto [field, flag] : {std::pair{&description.shadow_mode, &node.shadow_mode},
                             std::pair{&description.detailed_metric, &node.detailed_metric},
                             std::pair{&description.quota_mode, &node.quota_mode},
                             std::pair{&description.value_to_metric, &node.value_to_metric}}) {
    RETURN_IF_ERROR(field->read_error);
    *flag = field->value;
  }
  const Field<bool>& share = description.share_threshold;
  RETURN_IF_ERROR(share.read_error);
  // envoyproxy/ratelimit checks the descriptor's "key_value": a wildcard key will do.
  if (share.value && !IsWildcardPattern(node.value) && !IsWildcardPattern(node.key)) {
    return Error(share.line, FieldPath(path, "share_threshold"),
                 absl::StrCat("only a wildcard (a key or value containing '*') can share its "
                              "threshold, but neither key ",
                              Quoted(node.key), " nor value ", Quoted(node.value), " holds one"));
  }
  node.share_threshold = share.value;
  RETURN_IF_ERROR(description.metadata.read_error);
  if (description.metadata.value != nullptr && !description.metadata.value->fields().empty()) {
    node.metadata = std::move(description.metadata.value);
  }
  return absl::OkStatus();
}

std::string DomainBuilder::Place(const DescriptorNode& node) const {
  auto path = lineless_paths_.find(&node);
  return PlaceOf(node.line, path != lineless_paths_.end() ? path->second : "");
}

absl::Status DomainBuilder::Attach(std::unique_ptr<DescriptorNode> child, const std::string& path,
                                   DescriptorNode& parent, DescriptorNode*& attached) {
  DescriptorNode* raw = child.get();
  if (IsWildcardPattern(raw->key) || IsWildcardPattern(raw->value)) {
    // envoyproxy/ratelimit keys every descriptor by "key[_value]" (finalKey): two wildcards
    // whose strings coincide are one to it, refused as a duplicate.
    std::string composite =
        raw->value.empty() ? raw->key : absl::StrCat(raw->key, "_", raw->value);
    auto [it, inserted] = wildcards_.try_emplace(std::make_pair(&parent, composite), raw);
    if (!inserted) {
      const DescriptorNode& first = *it->second;
      if (first.key == raw->key && first.value == raw->value) {
        return Error(raw->line, path,
                     absl::StrCat("duplicate descriptor: key ", Quoted(raw->key),
                                  raw->value.empty() ? std::string()
                                                     : absl::StrCat(" value ", Quoted(raw->value)),
                                  " is already defined at ", Place(first)));
      }
      return Error(raw->line, path,
                   absl::StrCat("descriptor key ", Quoted(raw->key), " value ", Quoted(raw->value),
                                " has the same composite key ", Quoted(composite), " as key ",
                                Quoted(first.key), " value ", Quoted(first.value), " at ",
                                Place(first)));
    }
    if (IsWildcardPattern(raw->key)) {
      raw->key_wildcard = true;
      raw->composite_pattern = std::move(composite);
    }
    parent.wildcard_children.push_back(std::move(child));
  } else if (raw->value.empty()) {
    auto [it, inserted] = parent.default_children.try_emplace(raw->key, nullptr);
    if (!inserted) {
      return Error(raw->line, path,
                   absl::StrCat("duplicate descriptor: key ", Quoted(raw->key),
                                " without a value is already defined at ",
                                Place(*it->second)));
    }
    it->second = std::move(child);
  } else {
    auto [it, inserted] =
        parent.exact_children.try_emplace(absl::StrCat(raw->key, "_", raw->value), nullptr);
    if (!inserted) {
      const DescriptorNode& first = *it->second;
      if (first.key == raw->key) {
        return Error(raw->line, path,
                     absl::StrCat("duplicate descriptor: key ", Quoted(raw->key), " value ",
                                  Quoted(raw->value), " is already defined at ", Place(first)));
      }
      // envoyproxy/ratelimit refuses this too ("duplicate descriptor composite key"): both
      // would have the same stat key.
      return Error(raw->line, path,
                   absl::StrCat("descriptor key ", Quoted(raw->key), " value ", Quoted(raw->value),
                                " has the same composite key ", Quoted(it->first), " as key ",
                                Quoted(first.key), " value ", Quoted(first.value), " at ",
                                Place(first)));
    }
    it->second = std::move(child);
  }
  if (raw->line == 0) {
    lineless_paths_.emplace(raw, path);
  }
  attached = raw;
  return absl::OkStatus();
}

// Moves the descriptors of `from` (a later description's root of the same domain) under
// `into`, as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG patches a domain: a descriptor defined
// in both is an error naming both places.
absl::Status MergeChildren(DescriptorNode& from, DescriptorNode& into) {
  auto duplicate = [](const DescriptorNode& node, const DescriptorNode& first) {
    return absl::InvalidArgumentError(absl::StrCat(
        ConfigLocation(node.file, node.line), ": duplicate descriptor: key ", Quoted(node.key),
        node.value.empty() ? std::string() : absl::StrCat(" value ", Quoted(node.value)),
        " of domain ", Quoted(node.full_key.substr(0, node.full_key.find('.'))),
        " is already defined at ", ConfigLocation(first.file, first.line)));
  };
  for (auto& [name, child] : from.exact_children) {
    auto [it, inserted] = into.exact_children.try_emplace(name, nullptr);
    if (!inserted) {
      return duplicate(*child, *it->second);
    }
    it->second = std::move(child);
  }
  for (auto& [name, child] : from.default_children) {
    auto [it, inserted] = into.default_children.try_emplace(name, nullptr);
    if (!inserted) {
      return duplicate(*child, *it->second);
    }
    it->second = std::move(child);
  }
  // By "key[_value]", as AddDescriptor's check.
  const auto composite = [](const DescriptorNode& node) {
    return node.value.empty() ? node.key : absl::StrCat(node.key, "_", node.value);
  };
  absl::flat_hash_map<std::string, const DescriptorNode*> wildcards;
  for (const auto& sibling : into.wildcard_children) {
    wildcards.try_emplace(composite(*sibling), sibling.get());
  }
  for (auto& child : from.wildcard_children) {
    auto [it, inserted] = wildcards.try_emplace(composite(*child), child.get());
    if (!inserted) {
      return duplicate(*child, *it->second);
    }
    into.wildcard_children.push_back(std::move(child));
  }
  return absl::OkStatus();
}

// Merges `later`'s failure_mode into `first`'s: one may set it, or both alike.
absl::Status MergeFailureMode(const Domain& later, Domain& first) {
  if (!later.failure_mode.has_value()) {
    return absl::OkStatus();
  }
  if (!first.failure_mode.has_value()) {
    first.failure_mode = later.failure_mode;
    first.failure_mode_at = later.failure_mode_at;
  } else if (*first.failure_mode != *later.failure_mode) {
    return absl::InvalidArgumentError(absl::StrCat(
        later.failure_mode_at, ": failure_mode: '", FailureModeName(*later.failure_mode),
        "' conflicts with '", FailureModeName(*first.failure_mode), "' of domain ",
        Quoted(first.name), " at ", first.failure_mode_at));
  }
  return absl::OkStatus();
}

}  // namespace

ConfigValidator::ConfigValidator(const ValidateOptions& options)
    : options_(options), config_(std::make_unique<Config>()) {}

absl::Status ConfigValidator::AddDomain(DomainDescription description) {
  std::vector<std::string>& warnings = config_->mutable_warnings();
  for (std::string& warning : description.warnings) {
    warnings.push_back(std::move(warning));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<Domain> domain,
      DomainBuilder(description.source, config_->mutable_warnings(), options_.fixed_windows_only)
          .Build(description));
  auto& domains = config_->mutable_domains();
  auto existing = domains.find(domain->name);
  if (existing == domains.end()) {
    std::string name = domain->name;
    domains.emplace(std::move(name), std::move(domain));
    return absl::OkStatus();
  }
  Domain& first = *existing->second;
  if (!options_.merge_domains) {
    return ConfigError(
        description.source, domain->root.line, "domain",
        absl::StrCat("duplicate domain ", Quoted(domain->name), " (first defined in ", first.file,
                     "; --merge_domain_config merges files of one domain)"));
  }
  RETURN_IF_ERROR(MergeFailureMode(*domain, first));
  return MergeChildren(domain->root, first.root);
}

std::unique_ptr<Config> ConfigValidator::Finish() { return std::move(config_); }

absl::StatusOr<std::unique_ptr<Config>> ValidateConfig(ConfigDescription description,
                                                       const ValidateOptions& options) {
  ConfigValidator validator(options);
  for (DomainDescription& domain : description.domains) {
    RETURN_IF_ERROR(validator.AddDomain(std::move(domain)));
  }
  return validator.Finish();
}

}  // namespace sluice
