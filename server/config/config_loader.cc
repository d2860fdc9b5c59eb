#include "server/config/config_loader.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/common/status_macros.h"
#include "server/config/wildcard.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

constexpr absl::string_view kUnitChoices = "second, minute, hour, day, week, month or year";
constexpr absl::string_view kAlgorithmChoices =
    "fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket or gcra";
constexpr absl::string_view kFailureModeChoices = "allow, deny or local";

// Deeper descriptor trees are refused: nobody writes them, and YAML aliases can build a tree
// that contains itself, which would otherwise recurse without end.
constexpr int kMaxDescriptorDepth = 64;
constexpr int kMaxMergeDepth = 16;

constexpr int64_t kMicrosPerSecond = 1'000'000;

constexpr absl::string_view kYamlIntTag = "tag:yaml.org,2002:int";
constexpr absl::string_view kYamlBoolTag = "tag:yaml.org,2002:bool";

const TimeUnit kAllUnits[] = {TimeUnit::kSecond, TimeUnit::kMinute, TimeUnit::kHour,
                              TimeUnit::kDay,    TimeUnit::kWeek,   TimeUnit::kMonth,
                              TimeUnit::kYear};

std::optional<TimeUnit> ParseUnit(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (TimeUnit unit : kAllUnits) {
    if (lower == UnitName(unit)) {
      return unit;
    }
  }
  return std::nullopt;
}

bool TakesBurst(Algorithm algorithm) {
  return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket ||
         algorithm == Algorithm::kGcra;
}

// 1-based line of `node`, or `fallback` when yaml-cpp has no position for it.
// Watches a YAML stream's documents through the parser's events: notes where the second
// document with any content starts. Empty documents (a trailing "---") do not count.
class DocumentCounter final : public YAML::EventHandler {
 public:
  // Documents looked at, at most: yaml-cpp 0.7 can report empty documents without end.
  static constexpr int kMaxDocuments = 64;

  // 1-based line of the second document with content, or 0 if there is none.
  int second_document_line() const { return second_line_; }
  // Documents seen, and the line where the last one started.
  int documents() const { return documents_; }
  int last_start_line() const { return start_line_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    content_line_ = 0;
    start_line_ = mark.line >= 0 ? mark.line + 1 : 1;
    ++documents_;
  }
  void OnDocumentEnd() override {
    if (content_line_ > 0 && ++with_content_ == 2) {
      second_line_ = content_line_;
    }
  }
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Content(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Content(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Content(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Content(mark);
  }
  void OnMapEnd() override {}

 private:
  // The document's first node, wherever the document started.
  void Content(const YAML::Mark& mark) {
    if (content_line_ == 0) {
      content_line_ = mark.line >= 0 ? mark.line + 1 : 1;
    }
  }

  int documents_ = 0;
  int start_line_ = 1;
  int content_line_ = 0;  // 0 while the document has no content
  int with_content_ = 0;
  int second_line_ = 0;
};

int LineOf(const YAML::Node& node, int fallback) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : fallback;
}

// "a map", "a list", "'text'", "nothing": what a node is, for error messages.
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return absl::StrCat("'", node.Scalar(), "'");
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "nothing";
}

std::string Field(absl::string_view path, absl::string_view field) {
  return path.empty() ? std::string(field) : absl::StrCat(path, ".", field);
}

std::string Index(absl::string_view path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

// One key of a YAML map, with merge keys ("<<") already expanded.
struct MapEntry {
  std::string name;
  YAML::Node value;
  int line = 0;  // 1-based line of the key: where a user looks for the field
};

using MapEntries = std::vector<MapEntry>;

const MapEntry* Find(const MapEntries& entries, absl::string_view name) {
  for (const MapEntry& entry : entries) {
    if (entry.name == name) {
      return &entry;
    }
  }
  return nullptr;
}

// Turns one file's YAML into a Domain. Every error is an InvalidArgument whose message starts
// with "<file>:<line>: <field path>: ". yaml-cpp throws; callers catch around Load().
class FileLoader {
 public:
  // Warnings (see Config::warnings) are appended to *warnings.
  FileLoader(absl::string_view file_name, std::vector<std::string>* warnings)
      : file_(file_name), warnings_(warnings) {}

  absl::StatusOr<std::unique_ptr<Domain>> Load(absl::string_view text);

 private:
  absl::Status Error(int line, absl::string_view path, absl::string_view what) const {
    if (path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", what));
    }
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", path, ": ", what));
  }

  void Warn(int line, absl::string_view path, absl::string_view what) const {
    warnings_->push_back(absl::StrCat(file_, ":", line, ": ", path, ": ", what));
  }

  // Reads the keys of `map` (which must be a map), expanding merge keys, and rejects
  // duplicates and any key not in `allowed`.
  absl::StatusOr<MapEntries> ReadMap(const YAML::Node& map, const std::string& path, int line,
                                     std::initializer_list<absl::string_view> allowed) const;
  absl::Status CollectEntries(const YAML::Node& map, const std::string& path, int line,
                              int merge_depth, MapEntries& out) const;

  absl::Status ReadString(const MapEntry& entry, const std::string& path, std::string& out) const;
  absl::Status ReadBool(const MapEntry& entry, const std::string& path, bool& out) const;
  absl::Status ReadUint32(const MapEntry& entry, const std::string& path, uint32_t& out) const;
  // A plain (unquoted) number in (0, 1].
  absl::Status ReadShare(const MapEntry& entry, const std::string& path, double& out) const;

  absl::Status LoadDescriptorList(const YAML::Node& list, const std::string& path, int line,
                                  int depth, DescriptorNode& parent) const;
  absl::Status LoadDescriptor(const YAML::Node& map, const std::string& path, int line,
                              int depth, DescriptorNode& parent) const;
  absl::Status LoadRule(const YAML::Node& map, const std::string& path, int line,
                        RateLimitRule& rule) const;
  absl::Status LoadReplaces(const MapEntry& entry, const std::string& path,
                            RateLimitRule& rule) const;
  // Adds `child` to `parent`, refusing a second descriptor with the same key and value.
  absl::Status Attach(std::unique_ptr<DescriptorNode> child, const std::string& path,
                      DescriptorNode& parent, DescriptorNode*& attached) const;

  absl::Status LoadMetadata(const MapEntry& entry, const std::string& path,
                            DescriptorNode& node) const;
  absl::Status ToProtoValue(const YAML::Node& yaml, const std::string& path, int line, int depth,
                            google::protobuf::Value& out) const;

  std::string file_;
  std::vector<std::string>* const warnings_;
};

absl::StatusOr<std::unique_ptr<Domain>> FileLoader::Load(absl::string_view text) {
  // Not YAML::LoadAll: in yaml-cpp 0.7 it loops forever, allocating, on some malformed input
  // (a line that starts with ',' where a document starts; fixed upstream in 2024). The first
  // document is built by YAML::Load; DocumentCounter looks at the others through the parser's
  // events, for a bounded number of documents.
  YAML::Node root;
  DocumentCounter counter;
  try {
    const std::string owned(text);
    root = YAML::Load(owned);
    std::istringstream in(owned);
    YAML::Parser parser(in);
    for (int i = 0; i < DocumentCounter::kMaxDocuments && parser.HandleNextDocument(counter);
         ++i) {
    }
  } catch (const YAML::Exception& e) {
    return Error(e.mark.line >= 0 ? e.mark.line + 1 : 1, "",
                 absl::StrCat("YAML syntax error: ", e.msg,
                              e.mark.column >= 0 ? absl::StrCat(" (column ", e.mark.column + 1, ")")
                                                 : std::string()));
  }
  if (counter.documents() >= DocumentCounter::kMaxDocuments) {
    return Error(counter.last_start_line(), "",
                 "YAML syntax error: the parser finds no end to the documents here (a stray ','?)");
  }
  if (root.IsNull()) {
    return Error(1, "", "file is empty (expected a map with 'domain' and 'descriptors')");
  }
  if (counter.second_document_line() > 0) {
    // A trailing "---" yields an empty document, which is harmless.
    return Error(counter.second_document_line(), "",
                 "more than one YAML document in the file (one file holds one domain)");
  }
  const int root_line = LineOf(root, 1);
  if (!root.IsMap()) {
    return Error(root_line, "",
                 absl::StrCat("expected a map with 'domain' and 'descriptors' at the top of the "
                              "file, got ",
                              Describe(root)));
  }
  ASSIGN_OR_RETURN(MapEntries entries,
                   ReadMap(root, "", root_line, {"domain", "descriptors", "failure_mode"}));

  const MapEntry* domain_entry = Find(entries, "domain");
  if (domain_entry == nullptr) {
    return Error(root_line, "domain", "missing (every file needs a non-empty domain)");
  }
  auto domain = std::make_unique<Domain>();
  RETURN_IF_ERROR(ReadString(*domain_entry, "domain", domain->name));
  if (domain->name.empty()) {
    return Error(domain_entry->line, "domain", "must not be empty");
  }
  domain->file = file_;
  domain->root.full_key = domain->name;
  domain->root.file = file_;
  domain->root.line = domain_entry->line;

  if (const MapEntry* mode = Find(entries, "failure_mode")) {
    std::string text;
    RETURN_IF_ERROR(ReadString(*mode, "failure_mode", text));
    const std::optional<FailureMode> parsed = ParseFailureMode(text);
    if (!parsed.has_value()) {
      return Error(mode->line, "failure_mode",
                   absl::StrCat("invalid failure mode '", text, "' (expected ",
                                kFailureModeChoices, ")"));
    }
    domain->failure_mode = *parsed;
    domain->failure_mode_at = absl::StrCat(file_, ":", mode->line);
  }

  if (const MapEntry* descriptors = Find(entries, "descriptors")) {
    RETURN_IF_ERROR(LoadDescriptorList(descriptors->value, "descriptors", descriptors->line, 1,
                                       domain->root));
  }
  return domain;
}

absl::StatusOr<MapEntries> FileLoader::ReadMap(
    const YAML::Node& map, const std::string& path, int line,
    std::initializer_list<absl::string_view> allowed) const {
  MapEntries entries;
  RETURN_IF_ERROR(CollectEntries(map, path, line, 0, entries));
  for (const MapEntry& entry : entries) {
    if (std::find(allowed.begin(), allowed.end(), entry.name) == allowed.end()) {
      return Error(entry.line, Field(path, entry.name),
                   absl::StrCat("unknown key (expected ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return entries;
}

absl::Status FileLoader::CollectEntries(const YAML::Node& map, const std::string& path, int line,
                                        int merge_depth, MapEntries& out) const {
  if (merge_depth > kMaxMergeDepth) {
    return Error(line, Field(path, "<<"), "merge keys nested too deeply");
  }
  std::vector<std::pair<YAML::Node, int>> merges;
  const size_t first = out.size();
  for (auto it = map.begin(); it != map.end(); ++it) {
    // A copy: `it->first` lives in a proxy that dies with this statement.
    const YAML::Node key = it->first;
    const int key_line = LineOf(key, line);
    if (!key.IsScalar()) {
      return Error(key_line, path, absl::StrCat("map keys must be strings, got ", Describe(key)));
    }
    // A plain "<<" is YAML's merge key (yaml-cpp 0.7 leaves it to us); a quoted one is a name.
    if (key.Scalar() == "<<" && key.Tag() == "?") {
      merges.emplace_back(it->second, key_line);
      continue;
    }
    for (size_t i = first; i < out.size(); ++i) {
      if (out[i].name == key.Scalar()) {
        return Error(key_line, Field(path, key.Scalar()),
                     absl::StrCat("duplicate key (first given at line ", out[i].line, ")"));
      }
    }
    out.push_back(MapEntry{key.Scalar(), it->second, key_line});
  }
  // Merged keys never override the map's own keys; among several merged maps the first wins.
  for (const auto& [value, merge_line] : merges) {
    std::vector<YAML::Node> sources;
    if (value.IsMap()) {
      sources.push_back(value);
    } else if (value.IsSequence()) {
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!it->IsMap()) {
          return Error(merge_line, Field(path, "<<"),
                       absl::StrCat("expected a map or a list of maps, got a list holding ",
                                    Describe(*it)));
        }
        sources.push_back(*it);
      }
    } else {
      return Error(merge_line, Field(path, "<<"),
                   absl::StrCat("expected a map or a list of maps, got ", Describe(value)));
    }
    for (const YAML::Node& source : sources) {
      MapEntries merged;
      RETURN_IF_ERROR(CollectEntries(source, path, merge_line, merge_depth + 1, merged));
      for (MapEntry& entry : merged) {
        bool present = false;
        for (size_t i = first; i < out.size(); ++i) {
          present = present || out[i].name == entry.name;
        }
        if (!present) {
          out.push_back(std::move(entry));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status FileLoader::ReadString(const MapEntry& entry, const std::string& path,
                                    std::string& out) const {
  // As envoyproxy/ratelimit (yaml.v2) reads a string field: any scalar's text, nothing for null.
  if (entry.value.IsNull()) {
    out.clear();
    return absl::OkStatus();
  }
  if (!entry.value.IsScalar()) {
    return Error(entry.line, path,
                 absl::StrCat("expected a string, got ", Describe(entry.value)));
  }
  out = entry.value.Scalar();
  return absl::OkStatus();
}

absl::Status FileLoader::ReadBool(const MapEntry& entry, const std::string& path,
                                  bool& out) const {
  const YAML::Node& value = entry.value;
  const bool plain = value.IsScalar() && (value.Tag() == "?" || value.Tag() == kYamlBoolTag);
  if (plain) {
    // YAML 1.1 booleans, as yaml.v2 (envoyproxy/ratelimit's parser) accepts them.
    static constexpr absl::string_view kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                                 "on",   "On",   "ON",   "y",   "Y"};
    static constexpr absl::string_view kFalse[] = {"false", "False", "FALSE", "no", "No", "NO",
                                                  "off",   "Off",   "OFF",   "n",  "N"};
    const std::string& text = value.Scalar();
    if (std::find(std::begin(kTrue), std::end(kTrue), text) != std::end(kTrue)) {
      out = true;
      return absl::OkStatus();
    }
    if (std::find(std::begin(kFalse), std::end(kFalse), text) != std::end(kFalse)) {
      out = false;
      return absl::OkStatus();
    }
  }
  std::string got = Describe(value);
  if (value.IsScalar() && !plain) {
    got = absl::StrCat("the quoted string '", value.Scalar(), "'");
  }
  return Error(entry.line, path, absl::StrCat("expected true or false, got ", got));
}

absl::Status FileLoader::ReadUint32(const MapEntry& entry, const std::string& path,
                                    uint32_t& out) const {
  const YAML::Node& value = entry.value;
  const std::string expected = "expected an unsigned 32-bit integer, got ";
  if (!value.IsScalar()) {
    return Error(entry.line, path, absl::StrCat(expected, Describe(value)));
  }
  const std::string& text = value.Scalar();
  if (value.Tag() != "?" && value.Tag() != kYamlIntTag) {
    // yaml.v2 refuses a quoted number for an integer field too.
    return Error(entry.line, path, absl::StrCat(expected, "the quoted string '", text, "'"));
  }
  absl::string_view digits = text;
  if (absl::StartsWith(digits, "+")) {
    digits.remove_prefix(1);
  }
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Error(entry.line, path, absl::StrCat(expected, "'", text, "'"));
  }
  if (digits.size() > 1 && digits[0] == '0') {
    // YAML 1.1 (and so envoyproxy/ratelimit) reads a leading zero as octal: refuse the ambiguity.
    return Error(entry.line, path,
                 absl::StrCat(expected, "'", text, "' (a leading zero means octal in YAML 1.1)"));
  }
  uint64_t parsed = 0;
  for (char c : digits) {
    parsed = parsed * 10 + static_cast<uint64_t>(c - '0');
    if (parsed > std::numeric_limits<uint32_t>::max()) {
      return Error(entry.line, path,
                   absl::StrCat(text, " is out of range (at most ",
                                std::numeric_limits<uint32_t>::max(), ")"));
    }
  }
  out = static_cast<uint32_t>(parsed);
  return absl::OkStatus();
}

absl::Status FileLoader::ReadShare(const MapEntry& entry, const std::string& path,
                                   double& out) const {
  const YAML::Node& value = entry.value;
  const std::string expected = "expected a number more than 0 and at most 1, got ";
  if (!value.IsScalar()) {
    return Error(entry.line, path, absl::StrCat(expected, Describe(value)));
  }
  const std::string& text = value.Scalar();
  if (value.Tag() != "?") {
    return Error(entry.line, path, absl::StrCat(expected, "the quoted string '", text, "'"));
  }
  // Decimal notation only: SimpleAtod alone would also take "nan", "inf" and hexadecimal.
  double parsed = 0;
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos ||
      !absl::SimpleAtod(text, &parsed)) {
    return Error(entry.line, path, absl::StrCat(expected, "'", text, "'"));
  }
  if (!(parsed > 0 && parsed <= 1)) {
    return Error(entry.line, path,
                 absl::StrCat(text, " is out of range (more than 0 and at most 1: the fraction "
                                    "of the limit one replica admits on its own)"));
  }
  out = parsed;
  return absl::OkStatus();
}

absl::Status FileLoader::LoadDescriptorList(const YAML::Node& list, const std::string& path,
                                            int line, int depth, DescriptorNode& parent) const {
  if (list.IsNull()) {
    return absl::OkStatus();  // "descriptors:" with nothing under it: an empty list
  }
  if (!list.IsSequence()) {
    return Error(line, path, absl::StrCat("expected a list of descriptors, got ", Describe(list)));
  }
  if (depth > kMaxDescriptorDepth) {
    return Error(line, path,
                 absl::StrCat("descriptors nested more than ", kMaxDescriptorDepth,
                              " levels deep"));
  }
  size_t index = 0;
  for (auto it = list.begin(); it != list.end(); ++it, ++index) {
    const std::string item_path = Index(path, index);
    const int item_line = LineOf(*it, line);
    if (!it->IsMap()) {
      return Error(item_line, item_path,
                   absl::StrCat("expected a map with 'key', got ", Describe(*it)));
    }
    RETURN_IF_ERROR(LoadDescriptor(*it, item_path, item_line, depth, parent));
  }
  return absl::OkStatus();
}

absl::Status FileLoader::LoadDescriptor(const YAML::Node& map, const std::string& path, int line,
                                        int depth, DescriptorNode& parent) const {
  ASSIGN_OR_RETURN(MapEntries entries,
                   ReadMap(map, path, line,
                           {"key", "value", "rate_limit", "rate_limits", "shadow_mode",
                            "quota_mode", "detailed_metric", "value_to_metric",
                            "share_threshold", "metadata", "descriptors"}));
  auto node = std::make_unique<DescriptorNode>();
  node->file = file_;
  node->line = line;

  const MapEntry* key = Find(entries, "key");
  if (key == nullptr) {
    return Error(line, Field(path, "key"), "missing (every descriptor needs a key)");
  }
  RETURN_IF_ERROR(ReadString(*key, Field(path, "key"), node->key));
  if (node->key.empty()) {
    return Error(key->line, Field(path, "key"), "must not be empty");
  }
  if (const MapEntry* value = Find(entries, "value")) {
    RETURN_IF_ERROR(ReadString(*value, Field(path, "value"), node->value));
  }
  if (const MapEntry* shadow = Find(entries, "shadow_mode")) {
    RETURN_IF_ERROR(ReadBool(*shadow, Field(path, "shadow_mode"), node->shadow_mode));
  }
  if (const MapEntry* detailed = Find(entries, "detailed_metric")) {
    RETURN_IF_ERROR(ReadBool(*detailed, Field(path, "detailed_metric"), node->detailed_metric));
  }
  if (const MapEntry* quota = Find(entries, "quota_mode")) {
    RETURN_IF_ERROR(ReadBool(*quota, Field(path, "quota_mode"), node->quota_mode));
  }
  if (const MapEntry* to_metric = Find(entries, "value_to_metric")) {
    RETURN_IF_ERROR(ReadBool(*to_metric, Field(path, "value_to_metric"), node->value_to_metric));
  }
  if (const MapEntry* share = Find(entries, "share_threshold")) {
    RETURN_IF_ERROR(ReadBool(*share, Field(path, "share_threshold"), node->share_threshold));
    if (node->share_threshold && !IsWildcardPattern(node->value)) {
      return Error(share->line, Field(path, "share_threshold"),
                   absl::StrCat("only a wildcard value (one containing '*') can share its "
                                "threshold, but value is '",
                                node->value, "'"));
    }
  }
  if (const MapEntry* metadata = Find(entries, "metadata")) {
    RETURN_IF_ERROR(LoadMetadata(*metadata, Field(path, "metadata"), *node));
  }
  node->full_key = node->value.empty()
                       ? absl::StrCat(parent.full_key, ".", node->key)
                       : absl::StrCat(parent.full_key, ".", node->key, "_", node->value);

  const MapEntry* single = Find(entries, "rate_limit");
  const MapEntry* several = Find(entries, "rate_limits");
  if (single != nullptr && several != nullptr) {
    return Error(std::max(single->line, several->line), path,
                 "rate_limit and rate_limits are mutually exclusive (put every rule in "
                 "rate_limits)");
  }
  if (single != nullptr) {
    RateLimitRule rule;
    RETURN_IF_ERROR(LoadRule(single->value, Field(path, "rate_limit"), single->line, rule));
    node->rules.push_back(std::move(rule));
  }
  if (several != nullptr) {
    const std::string rules_path = Field(path, "rate_limits");
    if (!several->value.IsSequence() || several->value.size() == 0) {
      return Error(several->line, rules_path,
                   absl::StrCat("expected a non-empty list of rate limits, got ",
                                several->value.IsSequence() ? "an empty list"
                                                            : Describe(several->value)));
    }
    std::vector<int> rule_lines;
    size_t index = 0;
    for (auto it = several->value.begin(); it != several->value.end(); ++it, ++index) {
      const std::string rule_path = Index(rules_path, index);
      const int rule_line = LineOf(*it, several->line);
      RateLimitRule rule;
      RETURN_IF_ERROR(LoadRule(*it, rule_path, rule_line, rule));
      for (size_t j = 0; j < node->rules.size(); ++j) {
        const RateLimitRule& earlier = node->rules[j];
        if (rule.unlimited || earlier.unlimited) {
          return Error(rule_line, rule_path,
                       "an unlimited rule must be the only rule of its descriptor");
        }
        if (earlier.params.algorithm == rule.params.algorithm &&
            earlier.params.period_us == rule.params.period_us) {
          return Error(rule_line, rule_path,
                       absl::StrCat("same algorithm (", AlgorithmName(rule.params.algorithm),
                                    ") and period (", rule.params.period_us / kMicrosPerSecond,
                                    "s) as ", Index(rules_path, j), " at line ", rule_lines[j],
                                    "; two such rules would share one counter"));
        }
      }
      rule_lines.push_back(rule_line);
      node->rules.push_back(std::move(rule));
    }
  }

  DescriptorNode* attached = nullptr;
  RETURN_IF_ERROR(Attach(std::move(node), path, parent, attached));
  if (const MapEntry* children = Find(entries, "descriptors")) {
    RETURN_IF_ERROR(LoadDescriptorList(children->value, Field(path, "descriptors"),
                                       children->line, depth + 1, *attached));
  }
  return absl::OkStatus();
}

absl::Status FileLoader::Attach(std::unique_ptr<DescriptorNode> child, const std::string& path,
                                DescriptorNode& parent, DescriptorNode*& attached) const {
  DescriptorNode* raw = child.get();
  if (raw->value.empty()) {
    auto [it, inserted] = parent.default_children.try_emplace(raw->key, nullptr);
    if (!inserted) {
      return Error(raw->line, path,
                   absl::StrCat("duplicate descriptor: key '", raw->key,
                                "' without a value is already defined at line ",
                                it->second->line));
    }
    it->second = std::move(child);
  } else if (IsWildcardPattern(raw->value)) {
    for (const std::unique_ptr<DescriptorNode>& sibling : parent.wildcard_children) {
      if (sibling->key == raw->key && sibling->value == raw->value) {
        return Error(raw->line, path,
                     absl::StrCat("duplicate descriptor: key '", raw->key, "' value '",
                                  raw->value, "' is already defined at line ", sibling->line));
      }
    }
    parent.wildcard_children.push_back(std::move(child));
  } else {
    auto [it, inserted] =
        parent.exact_children.try_emplace(absl::StrCat(raw->key, "_", raw->value), nullptr);
    if (!inserted) {
      const DescriptorNode& first = *it->second;
      if (first.key == raw->key) {
        return Error(raw->line, path,
                     absl::StrCat("duplicate descriptor: key '", raw->key, "' value '",
                                  raw->value, "' is already defined at line ", first.line));
      }
      // envoyproxy/ratelimit refuses this too ("duplicate descriptor composite key"): both
      // would have the same stat key.
      return Error(raw->line, path,
                   absl::StrCat("descriptor key '", raw->key, "' value '", raw->value,
                                "' has the same composite key '", it->first, "' as key '",
                                first.key, "' value '", first.value, "' at line ", first.line));
    }
    it->second = std::move(child);
  }
  attached = raw;
  return absl::OkStatus();
}

absl::Status FileLoader::LoadRule(const YAML::Node& map, const std::string& path, int line,
                                  RateLimitRule& rule) const {
  if (!map.IsMap()) {
    return Error(line, path, absl::StrCat("expected a map, got ", Describe(map)));
  }
  ASSIGN_OR_RETURN(MapEntries entries,
                   ReadMap(map, path, line,
                           {"unit", "requests_per_unit", "unlimited", "name", "replaces",
                            "algorithm", "burst", "unit_multiplier", "hash_tag",
                            "local_share"}));
  if (const MapEntry* unlimited = Find(entries, "unlimited")) {
    RETURN_IF_ERROR(ReadBool(*unlimited, Field(path, "unlimited"), rule.unlimited));
  }
  if (const MapEntry* name = Find(entries, "name")) {
    RETURN_IF_ERROR(ReadString(*name, Field(path, "name"), rule.name));
  }
  if (const MapEntry* replaces = Find(entries, "replaces")) {
    RETURN_IF_ERROR(LoadReplaces(*replaces, Field(path, "replaces"), rule));
  }
  if (const MapEntry* tag = Find(entries, "hash_tag")) {
    RETURN_IF_ERROR(ReadString(*tag, Field(path, "hash_tag"), rule.hash_tag));
    if (rule.hash_tag.empty()) {
      return Error(tag->line, Field(path, "hash_tag"),
                   "must name a descriptor entry key (e.g. user_id), not be empty");
    }
  }

  if (rule.unlimited) {
    for (absl::string_view field : {"unit", "algorithm", "burst", "unit_multiplier",
                                   "hash_tag", "local_share"}) {
      if (const MapEntry* entry = Find(entries, field)) {
        return Error(entry->line, Field(path, field), "must not be set when unlimited is true");
      }
    }
    if (const MapEntry* entry = Find(entries, "requests_per_unit")) {
      // envoyproxy/ratelimit ignores the number; so does Sluice, but says so.
      Warn(entry->line, Field(path, "requests_per_unit"),
           "ignored: the rule is unlimited (remove requests_per_unit or unlimited)");
    }
    return absl::OkStatus();
  }

  const MapEntry* unit = Find(entries, "unit");
  if (unit == nullptr) {
    return Error(line, Field(path, "unit"), absl::StrCat("missing (expected ", kUnitChoices, ")"));
  }
  std::string unit_text;
  RETURN_IF_ERROR(ReadString(*unit, Field(path, "unit"), unit_text));
  const std::optional<TimeUnit> parsed_unit = ParseUnit(unit_text);
  if (!parsed_unit.has_value()) {
    return Error(unit->line, Field(path, "unit"),
                 absl::StrCat("invalid unit '", unit_text, "' (expected ", kUnitChoices, ")"));
  }
  rule.unit = *parsed_unit;

  const MapEntry* requests = Find(entries, "requests_per_unit");
  if (requests == nullptr) {
    // envoyproxy/ratelimit reads a missing number as 0: every request is over the limit.
    Warn(line, Field(path, "requests_per_unit"),
         "missing: the limit is 0, so every request with hits is OVER_LIMIT");
    rule.requests_per_unit = 0;
  } else {
    RETURN_IF_ERROR(
        ReadUint32(*requests, Field(path, "requests_per_unit"), rule.requests_per_unit));
  }

  Algorithm algorithm = Algorithm::kFixedWindow;
  if (const MapEntry* entry = Find(entries, "algorithm")) {
    std::string text;
    RETURN_IF_ERROR(ReadString(*entry, Field(path, "algorithm"), text));
    const std::optional<Algorithm> parsed = ParseAlgorithm(absl::AsciiStrToLower(text));
    if (!parsed.has_value()) {
      return Error(entry->line, Field(path, "algorithm"),
                   absl::StrCat("invalid algorithm '", text, "' (expected ", kAlgorithmChoices,
                                ")"));
    }
    algorithm = *parsed;
  }

  const int64_t unit_seconds = UnitSeconds(rule.unit);
  if (const MapEntry* entry = Find(entries, "unit_multiplier")) {
    RETURN_IF_ERROR(ReadUint32(*entry, Field(path, "unit_multiplier"), rule.unit_multiplier));
    if (rule.unit_multiplier < 1) {
      return Error(entry->line, Field(path, "unit_multiplier"), "must be at least 1");
    }
    // Periods stay within 2^50 microseconds (35.7 years): the Lua scripts compute in doubles,
    // and every time their retry search visits must stay below 2^53 to be exact.
    const int64_t max_multiplier = (int64_t{1} << 50) / kMicrosPerSecond / unit_seconds;
    if (rule.unit_multiplier > max_multiplier) {
      return Error(entry->line, Field(path, "unit_multiplier"),
                   absl::StrCat("period too long: at most ", max_multiplier, " ",
                                UnitName(rule.unit), "s"));
    }
  }

  uint64_t burst = rule.requests_per_unit;
  if (const MapEntry* entry = Find(entries, "burst")) {
    if (!TakesBurst(algorithm)) {
      return Error(entry->line, Field(path, "burst"),
                   absl::StrCat("not allowed with algorithm ", AlgorithmName(algorithm),
                                " (only token_bucket, leaky_bucket and gcra have a burst)"));
    }
    uint32_t value = 0;
    RETURN_IF_ERROR(ReadUint32(*entry, Field(path, "burst"), value));
    if (value < 1) {
      return Error(entry->line, Field(path, "burst"), "must be at least 1");
    }
    burst = value;
  }

  if (const MapEntry* entry = Find(entries, "local_share")) {
    double share = 1;
    RETURN_IF_ERROR(ReadShare(*entry, Field(path, "local_share"), share));
    rule.local_share = share;
  }

  const int64_t period_seconds = unit_seconds * static_cast<int64_t>(rule.unit_multiplier);
  rule.params.algorithm = algorithm;
  rule.params.limit = rule.requests_per_unit;
  rule.params.period_us = period_seconds * kMicrosPerSecond;
  rule.params.burst = burst;
  rule.key_suffix = RuleKeySuffix(algorithm, period_seconds);
  return absl::OkStatus();
}

absl::Status FileLoader::LoadMetadata(const MapEntry& entry, const std::string& path,
                                      DescriptorNode& node) const {
  if (entry.value.IsNull()) {
    return absl::OkStatus();
  }
  if (!entry.value.IsMap()) {
    return Error(entry.line, path, absl::StrCat("expected a map, got ", Describe(entry.value)));
  }
  google::protobuf::Value value;
  RETURN_IF_ERROR(ToProtoValue(entry.value, path, entry.line, 0, value));
  if (value.struct_value().fields().empty()) {
    return absl::OkStatus();
  }
  node.metadata = std::make_shared<const google::protobuf::Struct>(
      std::move(*value.mutable_struct_value()));
  return absl::OkStatus();
}

// YAML to a protobuf Value, typing plain scalars as yaml.v2 (and so envoyproxy/ratelimit)
// does: null, booleans, integers and floats; anything else, and every quoted scalar, is a string.
absl::Status FileLoader::ToProtoValue(const YAML::Node& yaml, const std::string& path, int line,
                                      int depth, google::protobuf::Value& out) const {
  if (depth > kMaxDescriptorDepth) {
    return Error(line, path, absl::StrCat("nested more than ", kMaxDescriptorDepth,
                                          " levels deep"));
  }
  switch (yaml.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out.set_null_value(google::protobuf::NULL_VALUE);
      return absl::OkStatus();
    case YAML::NodeType::Sequence: {
      auto* list = out.mutable_list_value();
      size_t index = 0;
      for (auto it = yaml.begin(); it != yaml.end(); ++it, ++index) {
        RETURN_IF_ERROR(ToProtoValue(*it, Index(path, index), LineOf(*it, line), depth + 1,
                                     *list->add_values()));
      }
      return absl::OkStatus();
    }
    case YAML::NodeType::Map: {
      auto* fields = out.mutable_struct_value()->mutable_fields();
      MapEntries entries;
      RETURN_IF_ERROR(CollectEntries(yaml, path, line, 0, entries));
      for (const MapEntry& entry : entries) {
        RETURN_IF_ERROR(ToProtoValue(entry.value, Field(path, entry.name), entry.line,
                                     depth + 1, (*fields)[entry.name]));
      }
      return absl::OkStatus();
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& text = yaml.Scalar();
  if (yaml.Tag() != "?") {  // quoted, or explicitly tagged: the text as written
    out.set_string_value(text);
    return absl::OkStatus();
  }
  static constexpr absl::string_view kNull[] = {"~", "null", "Null", "NULL"};
  static constexpr absl::string_view kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                               "on",   "On",   "ON",   "y",   "Y"};
  static constexpr absl::string_view kFalse[] = {"false", "False", "FALSE", "no", "No", "NO",
                                                "off",   "Off",   "OFF",   "n",  "N"};
  auto in = [&text](auto& list) {
    return std::find(std::begin(list), std::end(list), text) != std::end(list);
  };
  if (text.empty() || in(kNull)) {
    out.set_null_value(google::protobuf::NULL_VALUE);
  } else if (in(kTrue)) {
    out.set_bool_value(true);
  } else if (in(kFalse)) {
    out.set_bool_value(false);
  } else {
    int64_t integer = 0;
    double number = 0;
    if (absl::SimpleAtoi(text, &integer)) {
      out.set_number_value(static_cast<double>(integer));
    } else if (text.find_first_not_of("0123456789+-.eE") == std::string::npos &&
               absl::SimpleAtod(text, &number)) {
      out.set_number_value(number);
    } else {
      out.set_string_value(text);
    }
  }
  return absl::OkStatus();
}

absl::Status FileLoader::LoadReplaces(const MapEntry& entry, const std::string& path,
                                      RateLimitRule& rule) const {
  if (entry.value.IsNull()) {
    return absl::OkStatus();
  }
  if (!entry.value.IsSequence()) {
    return Error(entry.line, path,
                 absl::StrCat("expected a list of {name: ...} maps, got ", Describe(entry.value)));
  }
  size_t index = 0;
  for (auto it = entry.value.begin(); it != entry.value.end(); ++it, ++index) {
    const std::string item_path = Index(path, index);
    const int item_line = LineOf(*it, entry.line);
    if (!it->IsMap()) {
      return Error(item_line, item_path,
                   absl::StrCat("expected a map with 'name', got ", Describe(*it)));
    }
    ASSIGN_OR_RETURN(MapEntries fields, ReadMap(*it, item_path, item_line, {"name"}));
    const MapEntry* name = Find(fields, "name");
    std::string replaced;
    if (name != nullptr) {
      RETURN_IF_ERROR(ReadString(*name, Field(item_path, "name"), replaced));
    }
    if (replaced.empty()) {
      return Error(name != nullptr ? name->line : item_line, Field(item_path, "name"),
                   "must be a non-empty rule name");
    }
    if (replaced == rule.name) {
      return Error(name->line, Field(item_path, "name"),
                   absl::StrCat("a rule cannot replace itself ('", replaced, "')"));
    }
    rule.replaces.push_back(std::move(replaced));
  }
  return absl::OkStatus();
}

absl::Status ReadFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", std::strerror(errno)));
  }
  out = std::move(buffer).str();
  return absl::OkStatus();
}

bool IsConfigFileName(absl::string_view name) {
  return !name.empty() && name[0] != '.' &&
         (absl::EndsWith(name, ".yaml") || absl::EndsWith(name, ".yml"));
}

// Names below a runtime tree that are skipped: Kubernetes ConfigMap internals (..data,
// ..2024_01_01_...) always, since loading them would define every domain twice; other dot
// names when the options say so.
bool SkippedRuntimeName(absl::string_view name, const ConfigLoadOptions& options) {
  return absl::StartsWith(name, "..") || (options.ignore_dot_files && absl::StartsWith(name, "."));
}

// Every regular file below `dir`, recursively, in path order. Symlinked files are followed,
// symlinked directories are not (as envoyproxy/ratelimit's runtime loader walks the tree).
absl::Status ReadRuntimeTree(const std::string& dir, const ConfigLoadOptions& options,
                             std::vector<ConfigSource>& sources) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, error), end;
  for (; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code entry_error;
    if (SkippedRuntimeName(name, options)) {
      if (it->is_directory(entry_error) && !it->is_symlink(entry_error)) {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (it->is_symlink(entry_error)) {
      const fs::file_status target = it->status(entry_error);
      if (entry_error || !fs::exists(target)) {
        return absl::InvalidArgumentError(
            absl::StrCat(it->path().string(), ": cannot read: dangling symbolic link"));
      }
      if (!fs::is_regular_file(target)) {
        continue;  // a symlinked directory: not walked
      }
    } else if (!it->is_regular_file(entry_error)) {
      continue;
    }
    sources.push_back(ConfigSource{it->path().string(), ""});
  }
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot list directory: ",
                                                   error.message()));
  }
  std::sort(sources.begin(), sources.end(), [](const ConfigSource& a, const ConfigSource& b) {
    return a.file_name < b.file_name;
  });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ConfigSource>> ReadSources(const std::string& path,
                                                      const ConfigLoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no such file or directory",
                     error && error != std::errc::no_such_file_or_directory
                         ? absl::StrCat(" (", error.message(), ")")
                         : std::string()));
  }
  std::vector<ConfigSource> sources;
  if (fs::is_regular_file(status)) {
    sources.push_back(ConfigSource{path, ""});
  } else if (fs::is_directory(status) && options.recursive) {
    RETURN_IF_ERROR(ReadRuntimeTree(path, options, sources));
  } else if (fs::is_directory(status)) {
    for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      // Dot names cover Kubernetes ConfigMap internals (..data, ..2024_01_01...) and editors'
      // temporary files.
      if (!IsConfigFileName(name)) {
        continue;
      }
      std::error_code entry_error;
      const fs::file_status entry_status = it->status(entry_error);  // follows symlinks
      if (entry_error || !fs::exists(entry_status)) {
        // Most likely a symlink whose target is gone: refusing beats dropping a domain.
        return absl::InvalidArgumentError(
            absl::StrCat((fs::path(path) / name).string(), ": cannot read: ",
                         entry_error ? entry_error.message() : "dangling symbolic link"));
      }
      if (!fs::is_regular_file(entry_status)) {
        continue;  // e.g. a directory that happens to be called x.yaml
      }
      sources.push_back(ConfigSource{(fs::path(path) / name).string(), ""});
    }
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot list directory: ", error.message()));
    }
    if (sources.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": directory has no *.yaml or *.yml files"));
    }
    std::sort(sources.begin(), sources.end(),
              [](const ConfigSource& a, const ConfigSource& b) {
                return a.file_name < b.file_name;
              });
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file or a directory"));
  }
  for (ConfigSource& source : sources) {
    RETURN_IF_ERROR(ReadFile(source.file_name, source.text));
  }
  return sources;
}

// Moves the descriptors of `from` (a later file's root of the same domain) under `into`, as
// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG patches a domain: a descriptor defined in both
// is an error naming both places.
absl::Status MergeChildren(DescriptorNode& from, DescriptorNode& into) {
  auto duplicate = [](const DescriptorNode& node, const DescriptorNode& first) {
    return absl::InvalidArgumentError(absl::StrCat(
        node.file, ":", node.line, ": duplicate descriptor: key '", node.key, "'",
        node.value.empty() ? std::string() : absl::StrCat(" value '", node.value, "'"),
        " of domain '", node.full_key.substr(0, node.full_key.find('.')),
        "' is already defined at ", first.file, ":", first.line));
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
  for (auto& child : from.wildcard_children) {
    for (const auto& sibling : into.wildcard_children) {
      if (sibling->key == child->key && sibling->value == child->value) {
        return duplicate(*child, *sibling);
      }
    }
    into.wildcard_children.push_back(std::move(child));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Config>> LoadSources(const std::vector<ConfigSource>& sources,
                                                    const ConfigLoadOptions& options) {
  auto config = std::make_unique<Config>();
  for (const ConfigSource& source : sources) {
    FileLoader loader(source.file_name, &config->mutable_warnings());
    absl::StatusOr<std::unique_ptr<Domain>> domain;
    try {
      domain = loader.Load(source.text);
    } catch (const std::exception& e) {
      // Only a yaml-cpp surprise (or bad_alloc) can land here; still name the file.
      return absl::InvalidArgumentError(
          absl::StrCat(source.file_name, ":1: cannot load: ", e.what()));
    }
    if (!domain.ok()) {
      return domain.status();
    }
    auto& domains = config->mutable_domains();
    auto existing = domains.find((*domain)->name);
    if (existing != domains.end()) {
      if (!options.merge_domains) {
        return absl::InvalidArgumentError(absl::StrCat(
            source.file_name, ":", (*domain)->root.line, ": domain: duplicate domain '",
            (*domain)->name, "' (first defined in ", existing->second->file,
            "; --merge_domain_config merges files of one domain)"));
      }
      Domain& first = *existing->second;
      const Domain& later = **domain;
      if (later.failure_mode.has_value()) {
        if (!first.failure_mode.has_value()) {
          first.failure_mode = later.failure_mode;
          first.failure_mode_at = later.failure_mode_at;
        } else if (*first.failure_mode != *later.failure_mode) {
          return absl::InvalidArgumentError(absl::StrCat(
              later.failure_mode_at, ": failure_mode: '", FailureModeName(*later.failure_mode),
              "' conflicts with '", FailureModeName(*first.failure_mode), "' of domain '",
              first.name, "' at ", first.failure_mode_at));
        }
      }
      RETURN_IF_ERROR(MergeChildren((*domain)->root, existing->second->root));
      continue;
    }
    std::string name = (*domain)->name;
    domains.emplace(std::move(name), *std::move(domain));
  }
  return config;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Config>> LoadConfigPath(const std::string& path,
                                                       const ConfigLoadOptions& options) {
  try {
    ASSIGN_OR_RETURN(std::vector<ConfigSource> sources, ReadSources(path, options));
    return LoadSources(sources, options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot load: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<Config>> LoadConfigText(absl::string_view file_name,
                                                       absl::string_view text) {
  try {
    std::vector<ConfigSource> sources;
    sources.push_back(ConfigSource{std::string(file_name), std::string(text)});
    return LoadSources(sources, ConfigLoadOptions{});
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": cannot load: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<Config>> LoadConfigSources(const std::vector<ConfigSource>& sources,
                                                          const ConfigLoadOptions& options) {
  try {
    return LoadSources(sources, options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load configuration: ", e.what()));
  }
}

}  // namespace sluice
