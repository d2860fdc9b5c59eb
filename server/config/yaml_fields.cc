#include "server/config/yaml_fields.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "server/common/status_macros.h"

namespace sluice {
namespace {

constexpr int kMaxMergeDepth = 16;
// Metadata nested deeper than this is refused (a YAML alias can build a map that contains
// itself).
constexpr int kMaxStructDepth = 64;

constexpr absl::string_view kYamlIntTag = "tag:yaml.org,2002:int";
constexpr absl::string_view kYamlBoolTag = "tag:yaml.org,2002:bool";

// YAML 1.1 booleans and nulls, as yaml.v2 (envoyproxy/ratelimit's parser) reads them.
constexpr absl::string_view kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                       "on",   "On",   "ON",   "y",   "Y"};
constexpr absl::string_view kFalse[] = {"false", "False", "FALSE", "no", "No", "NO",
                                        "off",   "Off",   "OFF",   "n",  "N"};
constexpr absl::string_view kNull[] = {"~", "null", "Null", "NULL"};

template <size_t N>
bool OneOf(const absl::string_view (&spellings)[N], absl::string_view text) {
  return std::find(std::begin(spellings), std::end(spellings), text) != std::end(spellings);
}

// yaml.v2's yamlStyleFloat (resolve.go): ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
bool IsYamlStyleFloat(absl::string_view s) {
  const auto digits = [](absl::string_view part) {
    return part.find_first_not_of("0123456789") == absl::string_view::npos;
  };
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    s.remove_prefix(1);
  }
  const size_t exponent = s.find_first_of("eE");
  const absl::string_view mantissa = s.substr(0, exponent);
  const size_t point = mantissa.find('.');
  const absl::string_view whole = mantissa.substr(0, point);
  const absl::string_view fraction =
      point == absl::string_view::npos ? absl::string_view() : mantissa.substr(point + 1);
  const bool mantissa_ok = whole.empty() ? !fraction.empty() && digits(fraction)
                                         : digits(whole) && digits(fraction);
  if (!mantissa_ok) {
    return false;
  }
  if (exponent == absl::string_view::npos) {
    return true;
  }
  absl::string_view power = s.substr(exponent + 1);
  if (!power.empty() && (power[0] == '+' || power[0] == '-')) {
    power.remove_prefix(1);
  }
  return !power.empty() && digits(power);
}

// Each Parse* reads `value` into `out` and returns nullopt, or returns what is wrong with it.

std::optional<std::string> ParseString(const YAML::Node& value, std::string& out) {
  if (value.IsNull()) {
    out.clear();
    return std::nullopt;
  }
  if (!value.IsScalar()) {
    return absl::StrCat("expected a string, got ", Describe(value));
  }
  if (value.Tag() == "?" && IsRefusedScalar(value.Scalar())) {
    return absl::StrCat("expected a string, got ", value.Scalar(),
                        ", a float or an integer beyond 64 bits, which envoyproxy/ratelimit "
                        "refuses; quote it: \"", value.Scalar(), "\"");
  }
  out = value.Scalar();
  return std::nullopt;
}

std::optional<std::string> ParseBool(const YAML::Node& value, bool& out) {
  const bool plain = value.IsScalar() && (value.Tag() == "?" || value.Tag() == kYamlBoolTag);
  if (plain && OneOf(kTrue, value.Scalar())) {
    out = true;
    return std::nullopt;
  }
  if (plain && OneOf(kFalse, value.Scalar())) {
    out = false;
    return std::nullopt;
  }
  std::string got = Describe(value);
  if (value.IsScalar() && !plain) {
    got = absl::StrCat("the quoted string '", value.Scalar(), "'");
  }
  return absl::StrCat("expected true or false, got ", got);
}

std::optional<std::string> ParseUint32(const YAML::Node& value, uint32_t& out) {
  const std::string expected = "expected an unsigned 32-bit integer, got ";
  if (!value.IsScalar()) {
    return absl::StrCat(expected, Describe(value));
  }
  const std::string& text = value.Scalar();
  if (value.Tag() != "?" && value.Tag() != kYamlIntTag) {
    // yaml.v2 refuses a quoted number for an integer field too.
    return absl::StrCat(expected, "the quoted string '", text, "'");
  }
  absl::string_view digits = text;
  if (absl::StartsWith(digits, "+")) {
    digits.remove_prefix(1);
  }
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return absl::StrCat(expected, "'", text, "'");
  }
  if (digits.size() > 1 && digits[0] == '0') {
    // YAML 1.1 (and so envoyproxy/ratelimit) reads a leading zero as octal: refuse the ambiguity.
    return absl::StrCat(expected, "'", text, "' (a leading zero means octal in YAML 1.1)");
  }
  uint64_t parsed = 0;
  for (char c : digits) {
    parsed = parsed * 10 + static_cast<uint64_t>(c - '0');
    if (parsed > std::numeric_limits<uint32_t>::max()) {
      return absl::StrCat(text, " is out of range (at most ", std::numeric_limits<uint32_t>::max(),
                          ")");
    }
  }
  out = static_cast<uint32_t>(parsed);
  return std::nullopt;
}

std::optional<std::string> ParseNumber(const YAML::Node& value, absl::string_view expected,
                                       double& out) {
  const std::string prefix = absl::StrCat("expected ", expected, ", got ");
  if (!value.IsScalar()) {
    return absl::StrCat(prefix, Describe(value));
  }
  const std::string& text = value.Scalar();
  if (value.Tag() != "?") {
    return absl::StrCat(prefix, "the quoted string '", text, "'");
  }
  // Decimal notation only: SimpleAtod alone would also take "nan", "inf" and hexadecimal.
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos ||
      !absl::SimpleAtod(text, &out)) {
    return absl::StrCat(prefix, "'", text, "'");
  }
  return std::nullopt;
}

// A plain (untagged, unquoted) scalar as yaml.v2 types it.
void SetPlainScalar(const std::string& text, google::protobuf::Value& out) {
  if (text.empty() || OneOf(kNull, text)) {
    out.set_null_value(google::protobuf::NULL_VALUE);
  } else if (OneOf(kTrue, text)) {
    out.set_bool_value(true);
  } else if (OneOf(kFalse, text)) {
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
}

// Reads the entry `name` into `out` with `parse`, which returns what is wrong or nullopt.
template <typename T, typename Parse>
void ReadField(const YamlFieldReader& reader, const MapEntries& entries, absl::string_view name,
               absl::string_view path, Field<T>& out, Parse parse) {
  const MapEntry* entry = FindEntry(entries, name);
  if (entry == nullptr) {
    return;
  }
  out.given = true;
  out.line = entry->line;
  if (std::optional<std::string> wrong = parse(entry->value, out.value)) {
    out.value = T{};
    out.read_error = reader.Error(entry->line, FieldPath(path, name), *wrong);
  }
}

// Lenient readers only: reads a null entry `name` as T's zero value (`reads_as` in the warning)
// and returns true; false when the entry is absent or not null, or the reader is strict.
template <typename T>
bool ReadNullLeniently(const YamlFieldReader& reader, const MapEntries& entries,
                       absl::string_view name, absl::string_view path, absl::string_view reads_as,
                       Field<T>& out) {
  const MapEntry* entry = FindEntry(entries, name);
  if (!reader.lenient() || entry == nullptr || !entry->value.IsNull()) {
    return false;
  }
  out.given = true;
  out.line = entry->line;
  out.value = T{};
  reader.Warn(entry->line, FieldPath(path, name),
              absl::StrCat("empty: read as ", reads_as,
                           ", as envoyproxy/ratelimit reads it (--strict_config refuses it)"));
  return true;
}

}  // namespace

// Whether yaml.v2 reads the plain scalar `text` as a float (1.5, 1e3, .5, .inf) or as an
// integer that fits no int64 (a uint64): validateYamlKeys has a case for neither and refuses
// the file ("error checking config"). As resolve.go: its special floats; a leading '.' parsed
// as a float; a leading digit or sign, once every '_' is dropped, as strconv.ParseInt(s, 0, 64),
// then ParseUint, then yamlStyleFloat.
bool IsRefusedScalar(absl::string_view text) {
  static constexpr absl::string_view kSpecialFloats[] = {
      ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf",
      "-.INF"};
  if (std::find(std::begin(kSpecialFloats), std::end(kSpecialFloats), text) !=
      std::end(kSpecialFloats)) {
    return true;
  }
  if (text.empty()) {
    return false;
  }
  if (text[0] == '.') {
    return IsYamlStyleFloat(text);
  }
  if (!absl::ascii_isdigit(static_cast<unsigned char>(text[0])) && text[0] != '+' &&
      text[0] != '-') {
    return false;  // a string, a boolean or a null
  }
  const std::string plain = absl::StrReplaceAll(text, {{"_", ""}});
  absl::string_view number = plain;
  const bool sign = number[0] == '+' || number[0] == '-';
  const bool negative = number[0] == '-';
  if (sign) {
    number.remove_prefix(1);
  }
  // Go's base prefixes: 0x, 0b, 0o, or a leading 0 for octal.
  int base = 10;
  absl::string_view allowed = "0123456789";
  if (absl::StartsWithIgnoreCase(number, "0x")) {
    base = 16;
    allowed = "0123456789abcdefABCDEF";
    number.remove_prefix(2);
  } else if (absl::StartsWithIgnoreCase(number, "0b")) {
    base = 2;
    allowed = "01";
    number.remove_prefix(2);
  } else if (absl::StartsWithIgnoreCase(number, "0o")) {
    base = 8;
    allowed = "01234567";
    number.remove_prefix(2);
  } else if (number.size() > 1 && number[0] == '0') {
    base = 8;
    allowed = "01234567";
    number.remove_prefix(1);
  }
  if (!number.empty() && number.find_first_not_of(allowed) == absl::string_view::npos) {
    unsigned __int128 value = 0;
    for (char c : number) {
      const int digit = absl::ascii_isdigit(static_cast<unsigned char>(c))
                            ? c - '0'
                            : absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10;
      value = value * base + digit;
      if (value > std::numeric_limits<uint64_t>::max()) {
        break;  // past ParseUint too
      }
    }
    const unsigned __int128 int64_limit =
        static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    if (value <= int64_limit) {
      return false;  // an int
    }
    if (!sign && value <= std::numeric_limits<uint64_t>::max()) {
      return true;  // a uint64
    }
  }
  return IsYamlStyleFloat(plain);
}

const MapEntry* FindEntry(const MapEntries& entries, absl::string_view name) {
  for (const MapEntry& entry : entries) {
    if (entry.name == name) {
      return &entry;
    }
  }
  return nullptr;
}

int LineOf(const YAML::Node& node, int fallback) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : fallback;
}

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

absl::Status YamlFieldReader::Error(int line, absl::string_view path,
                                    absl::string_view what) const {
  return ConfigError(file_, line, path, what);
}

void YamlFieldReader::Warn(int line, absl::string_view path, absl::string_view what) const {
  if (lenient_warnings_->size() >= kMaxLenientWarnings) {
    ++unlisted_warnings_;
    return;
  }
  lenient_warnings_->push_back(ConfigMessage(file_, line, path, what));
}

absl::StatusOr<MapEntries> YamlFieldReader::ReadKeys(const YAML::Node& map,
                                                     const std::string& path, int line) const {
  MapEntries entries;
  RETURN_IF_ERROR(CollectEntries(map, path, line, 0, entries));
  return entries;
}

absl::StatusOr<MapEntries> YamlFieldReader::ReadMap(
    const YAML::Node& map, const std::string& path, int line,
    std::initializer_list<absl::string_view> allowed) const {
  ASSIGN_OR_RETURN(MapEntries entries, ReadKeys(map, path, line));
  for (const MapEntry& entry : entries) {
    if (std::find(allowed.begin(), allowed.end(), entry.name) == allowed.end()) {
      return Error(entry.line, FieldPath(path, entry.name),
                   absl::StrCat("unknown key (expected ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return entries;
}

absl::Status YamlFieldReader::CollectEntries(const YAML::Node& map, const std::string& path,
                                             int line, int merge_depth, MapEntries& out) const {
  if (merge_depth > kMaxMergeDepth) {
    return Error(line, FieldPath(path, "<<"),
                 absl::StrCat("merge keys nested more than ", kMaxMergeDepth, " levels deep"));
  }
  std::vector<std::pair<YAML::Node, int>> merges;
  // Names already in `out` from this map, with their index: a hash, since a map in metadata
  // may have hundreds of thousands of keys.
  absl::flat_hash_map<std::string, size_t> names;
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
    auto [seen, inserted] = names.try_emplace(key.Scalar(), out.size());
    if (!inserted) {
      MapEntry& first = out[seen->second];
      if (!lenient()) {
        return Error(key_line, FieldPath(path, key.Scalar()),
                     absl::StrCat("duplicate key (first given at line ", first.line, ")"));
      }
      // yaml.v2's non-strict Unmarshal sets the field again: the last one given wins.
      Warn(key_line, FieldPath(path, key.Scalar()),
           absl::StrCat("given twice (also at line ", first.line,
                        "): this one is used, as envoyproxy/ratelimit reads it "
                        "(--strict_config refuses it)"));
      first.value = it->second;
      first.line = key_line;
      continue;
    }
    out.push_back(MapEntry{key.Scalar(), it->second, key_line});
  }
  for (const auto& [value, merge_line] : merges) {
    std::vector<YAML::Node> sources;
    if (value.IsMap()) {
      sources.push_back(value);
    } else if (value.IsSequence()) {
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!it->IsMap()) {
          return Error(
              merge_line, FieldPath(path, "<<"),
              absl::StrCat("expected a map or a list of maps, got a list holding ", Describe(*it)));
        }
        sources.push_back(*it);
      }
    } else {
      return Error(merge_line, FieldPath(path, "<<"),
                   absl::StrCat("expected a map or a list of maps, got ", Describe(value)));
    }
    for (const YAML::Node& source : sources) {
      MapEntries merged;
      RETURN_IF_ERROR(CollectEntries(source, path, merge_line, merge_depth + 1, merged));
      for (MapEntry& entry : merged) {
        if (names.try_emplace(entry.name, out.size()).second) {
          out.push_back(std::move(entry));
        }
      }
    }
  }
  return absl::OkStatus();
}

void YamlFieldReader::ReadString(const MapEntries& entries, absl::string_view name,
                                 absl::string_view path, Field<std::string>& out) const {
  ReadField(*this, entries, name, path, out, ParseString);
}

void YamlFieldReader::ReadBool(const MapEntries& entries, absl::string_view name,
                               absl::string_view path, Field<bool>& out) const {
  if (!ReadNullLeniently(*this, entries, name, path, "false", out)) {
    ReadField(*this, entries, name, path, out, ParseBool);
  }
}

void YamlFieldReader::ReadUint32(const MapEntries& entries, absl::string_view name,
                                 absl::string_view path, Field<uint32_t>& out) const {
  if (!ReadNullLeniently(*this, entries, name, path, "0", out)) {
    ReadField(*this, entries, name, path, out, ParseUint32);
  }
}

void YamlFieldReader::ReadNumber(const MapEntries& entries, absl::string_view name,
                                 absl::string_view path, absl::string_view expected,
                                 Field<double>& out) const {
  ReadField(*this, entries, name, path, out, [expected](const YAML::Node& value, double& number) {
    return ParseNumber(value, expected, number);
  });
}

void YamlFieldReader::ReadStruct(
    const MapEntries& entries, absl::string_view name, absl::string_view path,
    Field<std::shared_ptr<const google::protobuf::Struct>>& out) const {
  const MapEntry* entry = FindEntry(entries, name);
  if (entry == nullptr) {
    return;
  }
  out.given = true;
  out.line = entry->line;
  if (entry->value.IsNull()) {
    return;
  }
  const std::string field_path = FieldPath(path, name);
  if (!entry->value.IsMap()) {
    out.read_error = Error(entry->line, field_path,
                           absl::StrCat("expected a map, got ", Describe(entry->value)));
    return;
  }
  google::protobuf::Value value;
  std::vector<YAML::Node> inside;
  out.read_error = ToProtoValue(entry->value, field_path, entry->line, 0, inside, value);
  if (out.read_error.ok()) {
    out.value =
        std::make_shared<const google::protobuf::Struct>(std::move(*value.mutable_struct_value()));
  }
}

absl::Status YamlFieldReader::ToProtoValue(const YAML::Node& yaml, const std::string& path,
                                           int line, int depth, std::vector<YAML::Node>& inside,
                                           google::protobuf::Value& out) const {
  if (depth > kMaxStructDepth) {
    return Error(line, path, absl::StrCat("nested more than ", kMaxStructDepth, " levels deep"));
  }
  if (yaml.IsSequence() || yaml.IsMap()) {
    for (const YAML::Node& outer : inside) {
      if (outer.is(yaml)) {
        return Error(line, path, "contains itself (an alias of a node it is inside)");
      }
    }
    inside.push_back(yaml);
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
        RETURN_IF_ERROR(ToProtoValue(*it, ItemPath(path, index), LineOf(*it, line), depth + 1,
                                     inside, *list->add_values()));
      }
      inside.pop_back();
      return absl::OkStatus();
    }
    case YAML::NodeType::Map: {
      auto* fields = out.mutable_struct_value()->mutable_fields();
      MapEntries entries;
      RETURN_IF_ERROR(CollectEntries(yaml, path, line, 0, entries));
      for (const MapEntry& entry : entries) {
        RETURN_IF_ERROR(ToProtoValue(entry.value, FieldPath(path, entry.name), entry.line,
                                     depth + 1, inside, (*fields)[entry.name]));
      }
      inside.pop_back();
      return absl::OkStatus();
    }
    case YAML::NodeType::Scalar:
      break;
  }
  if (yaml.Tag() != "?") {  // quoted, or explicitly tagged: the text as written
    out.set_string_value(yaml.Scalar());
  } else {
    SetPlainScalar(yaml.Scalar(), out);
  }
  return absl::OkStatus();
}

}  // namespace sluice
