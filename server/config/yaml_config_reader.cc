#include "server/config/yaml_config_reader.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "server/common/status_macros.h"
#include "server/config/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

// envoyproxy/ratelimit's keys (src/config/config_impl.go, validKeys). Its validateYamlKeys
// refuses any other key anywhere in a file (metadata aside), and lets each of these through
// wherever it stands; yaml.v2's non-strict Unmarshal into YamlRoot, YamlDescriptor and
// YamlRateLimit then drops one that has no field there. So `shadow_mode` under `rate_limit:`
// loads there, and does nothing.
constexpr absl::string_view kUpstreamKeys[] = {
    // YamlRoot
    "domain", "descriptors",
    // YamlDescriptor
    "key", "value", "rate_limit", "shadow_mode", "quota_mode", "detailed_metric",
    "value_to_metric", "share_threshold", "metadata",
    // YamlRateLimit, and yamlReplaces (name)
    "unit", "requests_per_unit", "unlimited", "name", "replaces"};

bool IsUpstreamKey(absl::string_view key) {
  return std::find(std::begin(kUpstreamKeys), std::end(kUpstreamKeys), key) !=
         std::end(kUpstreamKeys);
}

// The maps of the format, for messages about a key in the wrong one.
enum class Place { kTop, kDescriptor, kRule, kReplace };

absl::string_view PlaceName(Place place) {
  switch (place) {
    case Place::kTop:
      return "the top level";
    case Place::kDescriptor:
      return "a descriptor";
    case Place::kRule:
      return "a rate limit";
    case Place::kReplace:
      return "a replaces entry";
  }
  return "";
}

// Where an upstream key belongs.
absl::string_view HomeOf(absl::string_view key) {
  if (key == "domain") {
    return "at the top level";
  }
  if (key == "descriptors") {
    return "at the top level or on a descriptor";
  }
  if (key == "unit" || key == "requests_per_unit" || key == "unlimited" || key == "replaces") {
    return "in a rate_limit";
  }
  if (key == "name") {
    return "in a rate_limit or a replaces entry";
  }
  return "on a descriptor";
}

// Reads one file's top-level map into a DomainDescription, in the order the validator visits
// it (see config_description.h), so that stopping at a problem leaves out only what the
// validator would never look at.
class DomainReader {
 public:
  // `strict`: refuse what envoyproxy/ratelimit takes leniently (see YamlConfigReader).
  DomainReader(absl::string_view file_name, bool strict)
      : strict_(strict), fields_(file_name, strict ? nullptr : &warnings_) {}

  absl::StatusOr<DomainDescription> Read(const YAML::Node& root);

 private:
  // The keys of the map at `path` (a `place` of the format, whose key is on `line`) that are
  // `allowed` there. Any other key of envoyproxy/ratelimit's is ignored with a warning, as
  // upstream ignores it, once its value passes upstream's checks (CheckIgnored); or, strict,
  // refused. Anything else is refused.
  absl::StatusOr<MapEntries> ReadKeys(const YAML::Node& map, const std::string& path, int line,
                                      Place place,
                                      std::initializer_list<absl::string_view> allowed) const;
  // What validateYamlKeys checks in a value it walks (one Sluice ignores): every map key one of
  // upstream's, metadata not looked into, lists holding maps only, no float and no integer
  // beyond int64. `inside`: the lists and maps the walk is in; one that contains itself (an
  // alias of a node it is inside) is refused, as yaml.v2 refuses it ("anchor value contains
  // itself"), and walking it would not end.
  absl::Status CheckIgnored(const YAML::Node& node, const std::string& path, int line,
                            std::vector<YAML::Node>& inside) const;

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

  const bool strict_;
  std::vector<std::string> warnings_;  // lenient readings, for the description
  YamlFieldReader fields_;
};

// Ignored values nested deeper than this are refused: nobody writes them, and a walk must end.
constexpr int kMaxIgnoredDepth = 256;

absl::StatusOr<MapEntries> DomainReader::ReadKeys(
    const YAML::Node& map, const std::string& path, int line, Place place,
    std::initializer_list<absl::string_view> allowed) const {
  ASSIGN_OR_RETURN(MapEntries entries, fields_.ReadKeys(map, path, line));
  MapEntries kept;
  kept.reserve(entries.size());
  for (MapEntry& entry : entries) {
    if (std::find(allowed.begin(), allowed.end(), entry.name) != allowed.end()) {
      kept.push_back(std::move(entry));
      continue;
    }
    const std::string key_path = FieldPath(path, entry.name);
    if (!IsUpstreamKey(entry.name)) {
      return fields_.Error(
          entry.line, key_path,
          absl::StrCat("unknown key (expected ", absl::StrJoin(allowed, ", "), ")"));
    }
    const std::string misplaced = absl::StrCat("not a key of ", PlaceName(place), " (",
                                               entry.name, " belongs ", HomeOf(entry.name), ")");
    if (strict_) {
      return fields_.Error(entry.line, key_path,
                           absl::StrCat(misplaced,
                                        "; envoyproxy/ratelimit ignores it here, "
                                        "--strict_config refuses it"));
    }
    if (entry.name != "metadata") {
      std::vector<YAML::Node> inside;
      RETURN_IF_ERROR(CheckIgnored(entry.value, key_path, entry.line, inside));
    }
    fields_.Warn(entry.line, key_path,
                 absl::StrCat("ignored: ", misplaced,
                              ", as envoyproxy/ratelimit ignores it here "
                              "(--strict_config refuses it)"));
  }
  return kept;
}

absl::Status DomainReader::CheckIgnored(const YAML::Node& node, const std::string& path, int line,
                                        std::vector<YAML::Node>& inside) const {
  if (static_cast<int>(inside.size()) > kMaxIgnoredDepth) {
    return fields_.Error(line, path,
                         absl::StrCat("nested more than ", kMaxIgnoredDepth, " levels deep"));
  }
  if (node.IsSequence() || node.IsMap()) {
    for (const YAML::Node& outer : inside) {
      if (outer.is(node)) {
        return fields_.Error(line, path, "contains itself (an alias of a node it is inside)");
      }
    }
  }
  const absl::string_view refused = " (envoyproxy/ratelimit refuses it even where it ignores it)";
  if (node.IsScalar()) {
    const bool float_tag = node.Tag() == "tag:yaml.org,2002:float";
    if (float_tag || (node.Tag() == "?" && IsRefusedScalar(node.Scalar()))) {
      return fields_.Error(line, path,
                           absl::StrCat(Describe(node),
                                        " is a float or an integer beyond 64 bits", refused));
    }
    return absl::OkStatus();
  }
  if (!node.IsSequence() && !node.IsMap()) {
    return absl::OkStatus();  // null
  }
  inside.push_back(node);
  if (node.IsSequence()) {
    size_t index = 0;
    for (auto it = node.begin(); it != node.end(); ++it, ++index) {
      const std::string item_path = ItemPath(path, index);
      const int item_line = LineOf(*it, line);
      if (!it->IsMap()) {
        return fields_.Error(item_line, item_path,
                             absl::StrCat("a list holding ", Describe(*it), refused));
      }
      RETURN_IF_ERROR(CheckIgnored(*it, item_path, item_line, inside));
    }
  } else {
    ASSIGN_OR_RETURN(MapEntries entries, fields_.ReadKeys(node, path, line));
    for (const MapEntry& entry : entries) {
      const std::string key_path = FieldPath(path, entry.name);
      if (!IsUpstreamKey(entry.name)) {
        return fields_.Error(entry.line, key_path, absl::StrCat("unknown key", refused));
      }
      if (entry.name != "metadata") {
        RETURN_IF_ERROR(CheckIgnored(entry.value, key_path, entry.line, inside));
      }
    }
  }
  inside.pop_back();
  return absl::OkStatus();
}

absl::StatusOr<DomainDescription> DomainReader::Read(const YAML::Node& root) {
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
  ASSIGN_OR_RETURN(MapEntries entries, ReadKeys(root, "", root_line, Place::kTop,
                                                {"domain", "descriptors", "failure_mode"}));
  DomainDescription out;
  out.source = fields_.file();
  out.line = root_line;
  fields_.ReadString(entries, "domain", "", out.domain);
  fields_.ReadString(entries, "failure_mode", "", out.failure_mode);
  if (const MapEntry* descriptors = FindEntry(entries, "descriptors")) {
    ReadDescriptorList(*descriptors, "descriptors", 1, out.descriptors);
  }
  out.warnings = std::move(warnings_);
  if (fields_.unlisted_warnings() > 0) {
    out.warnings.push_back(absl::StrCat(fields_.file(), ": ", fields_.unlisted_warnings(),
                                        " more warnings like these not listed"));
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
  absl::StatusOr<MapEntries> entries = ReadKeys(
      map, path, out.line, Place::kDescriptor,
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
  if (single != nullptr && single->value.IsNull() && !strict_) {
    // yaml.v2 leaves YamlDescriptor.RateLimit nil: a descriptor without a limit.
    fields_.Warn(single->line, FieldPath(path, "rate_limit"),
                 "empty: the descriptor has no rate limit, as envoyproxy/ratelimit reads it "
                 "(--strict_config refuses it)");
    single = nullptr;
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
      ReadKeys(node, path, out.line, Place::kRule,
               {"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "burst",
                "unit_multiplier", "hash_tag", "local_share", "charge"});
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
    absl::StatusOr<MapEntries> fields =
        ReadKeys(*it, item_path, replace.line, Place::kReplace, {"name"});
    if (!fields.ok()) {
      replace.read_error = fields.status();
      return;
    }
    fields_.ReadString(*fields, "name", item_path, replace.name);
  }
}

}  // namespace

YamlConfigReader::YamlConfigReader(int64_t max_nodes, int64_t max_scalar_bytes, bool strict)
    : strict_(strict) {
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
  std::string rest_ignored;  // lenient: a second document, which yaml.v2 does not read
  try {
    const std::string owned(text);
    RETURN_IF_ERROR(ScanYamlText(file_name, owned, budget_, strict_ ? nullptr : &rest_ignored));
    root = YAML::Load(owned);  // the first document only
  } catch (const YAML::Exception& e) {
    return YamlExceptionError(file_name, e);
  }
  ASSIGN_OR_RETURN(DomainDescription domain, DomainReader(file_name, strict_).Read(root));
  if (!rest_ignored.empty()) {
    domain.warnings.push_back(std::move(rest_ignored));
  }
  return domain;
}

}  // namespace sluice
