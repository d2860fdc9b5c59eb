#include "server/config/yaml_config_reader.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/config/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

// Reads one file's top-level map into a DomainDescription, in the order the validator visits
// it (see config_description.h), so that stopping at a problem leaves out only what the
// validator would never look at.
class DomainReader {
 public:
  explicit DomainReader(absl::string_view file_name) : fields_(file_name) {}

  absl::StatusOr<DomainDescription> Read(const YAML::Node& root) const;

 private:
  // Each returns false when reading stopped at a problem it recorded in `out`.
  bool ReadDescriptorList(const MapEntry& entry, const std::string& path, int depth,
                          Field<std::vector<DescriptorDescription>>& out) const;
  bool ReadDescriptor(const YAML::Node& map, const std::string& path, int depth,
                      DescriptorDescription& out) const;
  bool ReadRules(const MapEntries& entries, const std::string& path,
                 DescriptorDescription& out) const;
  bool ReadRuleList(const MapEntry& entry, const std::string& path,
                    Field<std::vector<RuleDescription>>& out) const;
  bool ReadRule(const YAML::Node& node, const std::string& path, RuleDescription& out) const;
  // Stops at the first entry it cannot read (the validator stops there too).
  void ReadReplaces(const MapEntries& entries, const std::string& rule_path,
                    Field<std::vector<ReplaceDescription>>& out) const;

  YamlFieldReader fields_;
};

absl::StatusOr<DomainDescription> DomainReader::Read(const YAML::Node& root) const {
  if (root.IsNull()) {
    return fields_.Error(1, "", "file is empty (expected a map with 'domain' and 'descriptors')");
  }
  const int root_line = LineOf(root, 1);
  if (!root.IsMap()) {
    return fields_.Error(root_line, "",
                         absl::StrCat("expected a map with 'domain' and 'descriptors' at the top "
                                      "of the file, got ",
                                      Describe(root)));
  }
  ASSIGN_OR_RETURN(MapEntries entries,
                   fields_.ReadMap(root, "", root_line, {"domain", "descriptors", "failure_mode"}));
  DomainDescription out;
  out.source = fields_.file();
  out.line = root_line;
  fields_.ReadString(entries, "domain", "", out.domain);
  fields_.ReadString(entries, "failure_mode", "", out.failure_mode);
  if (const MapEntry* descriptors = FindEntry(entries, "descriptors")) {
    ReadDescriptorList(*descriptors, "descriptors", 1, out.descriptors);
  }
  return out;
}

bool DomainReader::ReadDescriptorList(const MapEntry& entry, const std::string& path, int depth,
                                      Field<std::vector<DescriptorDescription>>& out) const {
  out.given = true;
  out.line = entry.line;
  const YAML::Node& list = entry.value;
  if (list.IsNull()) {
    return true;  // "descriptors:" with nothing under it: an empty list
  }
  if (!list.IsSequence()) {
    out.read_error = fields_.Error(
        entry.line, path, absl::StrCat("expected a list of descriptors, got ", Describe(list)));
    return false;
  }
  if (depth > kMaxDescriptorDepth) {
    out.read_error = fields_.Error(
        entry.line, path,
        absl::StrCat("descriptors nested more than ", kMaxDescriptorDepth, " levels deep"));
    return false;
  }
  out.value.reserve(list.size());
  size_t index = 0;
  for (auto it = list.begin(); it != list.end(); ++it, ++index) {
    DescriptorDescription& item = out.value.emplace_back();
    const std::string item_path = ItemPath(path, index);
    item.line = LineOf(*it, entry.line);
    if (!it->IsMap()) {
      item.read_error = fields_.Error(
          item.line, item_path, absl::StrCat("expected a map with 'key', got ", Describe(*it)));
      return false;
    }
    if (!ReadDescriptor(*it, item_path, depth, item)) {
      return false;
    }
  }
  return true;
}

bool DomainReader::ReadDescriptor(const YAML::Node& map, const std::string& path, int depth,
                                  DescriptorDescription& out) const {
  absl::StatusOr<MapEntries> entries = fields_.ReadMap(
      map, path, out.line,
      {"key", "value", "rate_limit", "rate_limits", "shadow_mode", "quota_mode", "detailed_metric",
       "value_to_metric", "share_threshold", "metadata", "descriptors"});
  if (!entries.ok()) {
    out.read_error = entries.status();
    return false;
  }
  fields_.ReadString(*entries, "key", path, out.key);
  fields_.ReadString(*entries, "value", path, out.value);
  fields_.ReadBool(*entries, "shadow_mode", path, out.shadow_mode);
  fields_.ReadBool(*entries, "detailed_metric", path, out.detailed_metric);
  fields_.ReadBool(*entries, "quota_mode", path, out.quota_mode);
  fields_.ReadBool(*entries, "value_to_metric", path, out.value_to_metric);
  fields_.ReadBool(*entries, "share_threshold", path, out.share_threshold);
  fields_.ReadStruct(*entries, "metadata", path, out.metadata);
  if (!ReadRules(*entries, path, out)) {
    return false;
  }
  if (const MapEntry* children = FindEntry(*entries, "descriptors")) {
    return ReadDescriptorList(*children, FieldPath(path, "descriptors"), depth + 1,
                              out.descriptors);
  }
  return true;
}

bool DomainReader::ReadRules(const MapEntries& entries, const std::string& path,
                             DescriptorDescription& out) const {
  const MapEntry* single = FindEntry(entries, "rate_limit");
  const MapEntry* several = FindEntry(entries, "rate_limits");
  // Both are noted before either is read: the validator refuses the pair before it reads them.
  if (several != nullptr) {
    out.rate_limits.given = true;
    out.rate_limits.line = several->line;
  }
  if (single != nullptr) {
    RuleDescription& rule = out.rate_limit.emplace();
    rule.line = single->line;
    if (!ReadRule(single->value, FieldPath(path, "rate_limit"), rule)) {
      return false;
    }
  }
  if (several != nullptr) {
    return ReadRuleList(*several, FieldPath(path, "rate_limits"), out.rate_limits);
  }
  return true;
}

bool DomainReader::ReadRuleList(const MapEntry& entry, const std::string& path,
                                Field<std::vector<RuleDescription>>& out) const {
  const YAML::Node& list = entry.value;
  if (!list.IsSequence()) {
    out.read_error = fields_.Error(
        entry.line, path,
        absl::StrCat("expected a non-empty list of rate limits, got ", Describe(list)));
    return false;
  }
  out.value.reserve(list.size());
  size_t index = 0;
  for (auto it = list.begin(); it != list.end(); ++it, ++index) {
    RuleDescription& rule = out.value.emplace_back();
    rule.line = LineOf(*it, entry.line);
    if (!ReadRule(*it, ItemPath(path, index), rule)) {
      return false;
    }
  }
  return true;
}

bool DomainReader::ReadRule(const YAML::Node& node, const std::string& path,
                            RuleDescription& out) const {
  if (!node.IsMap()) {
    out.read_error =
        fields_.Error(out.line, path, absl::StrCat("expected a map, got ", Describe(node)));
    return false;
  }
  absl::StatusOr<MapEntries> entries =
      fields_.ReadMap(node, path, out.line,
                      {"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm",
                       "burst", "unit_multiplier", "hash_tag", "local_share", "charge"});
  if (!entries.ok()) {
    out.read_error = entries.status();
    return false;
  }
  fields_.ReadBool(*entries, "unlimited", path, out.unlimited);
  fields_.ReadString(*entries, "name", path, out.name);
  ReadReplaces(*entries, path, out.replaces);
  fields_.ReadString(*entries, "hash_tag", path, out.hash_tag);
  fields_.ReadString(*entries, "unit", path, out.unit);
  fields_.ReadUint32(*entries, "requests_per_unit", path, out.requests_per_unit);
  fields_.ReadString(*entries, "algorithm", path, out.algorithm);
  fields_.ReadUint32(*entries, "unit_multiplier", path, out.unit_multiplier);
  fields_.ReadUint32(*entries, "burst", path, out.burst);
  fields_.ReadNumber(*entries, "local_share", path, "a number more than 0 and at most 1",
                     out.local_share);
  fields_.ReadString(*entries, "charge", path, out.charge);
  return true;
}

void DomainReader::ReadReplaces(const MapEntries& entries, const std::string& rule_path,
                                Field<std::vector<ReplaceDescription>>& out) const {
  const MapEntry* entry = FindEntry(entries, "replaces");
  if (entry == nullptr) {
    return;
  }
  out.given = true;
  out.line = entry->line;
  const std::string path = FieldPath(rule_path, "replaces");
  const YAML::Node& list = entry->value;
  if (list.IsNull()) {
    return;
  }
  if (!list.IsSequence()) {
    out.read_error =
        fields_.Error(entry->line, path,
                      absl::StrCat("expected a list of {name: ...} maps, got ", Describe(list)));
    return;
  }
  size_t index = 0;
  for (auto it = list.begin(); it != list.end(); ++it, ++index) {
    ReplaceDescription& replace = out.value.emplace_back();
    const std::string item_path = ItemPath(path, index);
    replace.line = LineOf(*it, entry->line);
    if (!it->IsMap()) {
      replace.read_error = fields_.Error(
          replace.line, item_path, absl::StrCat("expected a map with 'name', got ", Describe(*it)));
      return;
    }
    absl::StatusOr<MapEntries> fields = fields_.ReadMap(*it, item_path, replace.line, {"name"});
    if (!fields.ok()) {
      replace.read_error = fields.status();
      return;
    }
    fields_.ReadString(*fields, "name", item_path, replace.name);
  }
}

}  // namespace

YamlConfigReader::YamlConfigReader(int64_t max_nodes, int64_t max_scalar_bytes) {
  budget_.max_nodes = max_nodes;
  budget_.max_scalar_bytes = max_scalar_bytes;
}

absl::StatusOr<DomainDescription> YamlConfigReader::Read(absl::string_view file_name,
                                                         absl::string_view text) {
  // Not YAML::LoadAll: in yaml-cpp 0.7 it loops forever, allocating, on some malformed input
  // (a line that starts with ',' where a document starts; fixed upstream in 2024). The stream
  // is first scanned through the parser's events (bounded: see ScanYamlText), and only then is
  // the first document built by YAML::Load.
  YAML::Node root;
  try {
    const std::string owned(text);
    RETURN_IF_ERROR(ScanYamlText(file_name, owned, budget_));
    root = YAML::Load(owned);
  } catch (const YAML::Exception& e) {
    return YamlExceptionError(file_name, e);
  }
  return DomainReader(file_name).Read(root);
}

}  // namespace sluice
