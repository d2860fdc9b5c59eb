// Reading YAML maps and scalars as envoyproxy/ratelimit's parser (yaml.v2) reads its config:
// map keys with YAML merge keys ("<<") expanded and repeated or unknown keys refused; strings,
// YAML 1.1 booleans, unsigned integers, plain numbers and free-form maps (metadata) typed as
// yaml.v2 types them. Each field is read into a Field (config_description.h): given, its line,
// and its value or, when it cannot be read as its type, the message saying why. The schema
// (which keys exist where) is yaml_config_reader.cc's.
//
// Every message is "<file>:<line>: <field path>: <what>". yaml-cpp may throw while nodes are
// walked (bad_alloc, or one of its own surprises); callers catch around the whole read.
// A YamlFieldReader is immutable, safe to use from several threads, unless it was given a list
// of warnings to append to: it is then for one thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "server/config/config_description.h"
#include "yaml-cpp/yaml.h"

namespace sluice {

// Whether yaml.v2 reads the plain (unquoted, untagged) scalar `text` as a float (1.5, 1e3, .5,
// .inf, 08) or as an integer that fits no int64: envoyproxy/ratelimit's config check
// (validateYamlKeys) refuses such a scalar wherever it stands, its string fields included.
bool IsRefusedScalar(absl::string_view text);

// One key of a YAML map, with merge keys ("<<") already expanded.
struct MapEntry {
  std::string name;
  YAML::Node value;
  int line = 0;  // 1-based line of the key: where a user looks for the field
};
using MapEntries = std::vector<MapEntry>;

// The entry called `name`, or nullptr.
const MapEntry* FindEntry(const MapEntries& entries, absl::string_view name);

// 1-based line of `node`, or `fallback` when yaml-cpp has no position for it.
int LineOf(const YAML::Node& node, int fallback);

// "a map", "a list", "'text'", "nothing": what a node is, for messages.
std::string Describe(const YAML::Node& node);

class YamlFieldReader {
 public:
  // With `lenient_warnings`, the reader takes what yaml.v2 reads without complaint (non-strict
  // Unmarshal, as envoyproxy/ratelimit calls it) where it would otherwise refuse, and appends a
  // warning for each to *lenient_warnings: a key given twice in one map (the last one given is
  // kept), and a null where a boolean or an integer belongs (false, 0). Without, both are
  // errors.
  explicit YamlFieldReader(absl::string_view file_name,
                           std::vector<std::string>* lenient_warnings = nullptr)
      : file_(file_name), lenient_warnings_(lenient_warnings) {}

  bool lenient() const { return lenient_warnings_ != nullptr; }
  // Appends "<file>:<line>: <path>: <what>" to the lenient warnings, or counts it once
  // kMaxLenientWarnings are listed (an alias can repeat one a million times). REQUIRES:
  // lenient().
  void Warn(int line, absl::string_view path, absl::string_view what) const;
  // The warnings counted but not listed.
  int64_t unlisted_warnings() const { return unlisted_warnings_; }
  static constexpr size_t kMaxLenientWarnings = 100;

  const std::string& file() const { return file_; }

  // kInvalidArgument "<file>:<line>: <path>: <what>" ("<file>:<line>: <what>" for an empty
  // path).
  absl::Status Error(int line, absl::string_view path, absl::string_view what) const;

  // The keys of `map` (REQUIRES: a map), the map at `path` whose key is on `line`, with merge
  // keys expanded: the map's own keys win over merged ones, and among several merged maps the
  // first wins. Refuses a key given twice (unless lenient()), a key that is not a string, a
  // merge key that does not merge maps, and any key not in `allowed`.
  absl::StatusOr<MapEntries> ReadMap(const YAML::Node& map, const std::string& path, int line,
                                     std::initializer_list<absl::string_view> allowed) const;
  // ReadMap's keys, every one of them: the caller judges which belong.
  absl::StatusOr<MapEntries> ReadKeys(const YAML::Node& map, const std::string& path,
                                      int line) const;

  // Each reads the entry `name` of `entries` (the map at `path`) into `out`; nothing when
  // absent. A string is any scalar's text, and empty for null.
  void ReadString(const MapEntries& entries, absl::string_view name, absl::string_view path,
                  Field<std::string>& out) const;
  // true, yes, on, y, false, no, off, n in their YAML 1.1 spellings; unquoted. Null: false
  // when lenient().
  void ReadBool(const MapEntries& entries, absl::string_view name, absl::string_view path,
                Field<bool>& out) const;
  // Unquoted decimal digits within 32 bits, no leading zero (octal in YAML 1.1). Null: 0 when
  // lenient().
  void ReadUint32(const MapEntries& entries, absl::string_view name, absl::string_view path,
                  Field<uint32_t>& out) const;
  // An unquoted number in decimal notation; `expected` names what the field holds, for the
  // message about anything else ("a number more than 0 and at most 1").
  void ReadNumber(const MapEntries& entries, absl::string_view name, absl::string_view path,
                  absl::string_view expected, Field<double>& out) const;
  // A map of anything, as a protobuf Struct with yaml.v2's scalar types (null, booleans,
  // numbers; anything else, and every quoted scalar, a string); null for YAML null.
  void ReadStruct(const MapEntries& entries, absl::string_view name, absl::string_view path,
                  Field<std::shared_ptr<const google::protobuf::Struct>>& out) const;

 private:
  absl::Status CollectEntries(const YAML::Node& map, const std::string& path, int line,
                              int merge_depth, MapEntries& out) const;
  // `inside`: the lists and maps the walk is in, to refuse one that contains itself (an alias
  // of a node it is inside), which the walk would otherwise expand down to kMaxStructDepth.
  absl::Status ToProtoValue(const YAML::Node& yaml, const std::string& path, int line, int depth,
                            std::vector<YAML::Node>& inside, google::protobuf::Value& out) const;

  const std::string file_;
  std::vector<std::string>* const lenient_warnings_;
  mutable int64_t unlisted_warnings_ = 0;
};

}  // namespace sluice
