// A rate-limit configuration as a source gave it, before any rule is checked: domains, their
// descriptor trees and the rules on each descriptor, every field with whether it was given,
// where, and whether the source could read it. A source builds one (the YAML reader,
// yaml_config_reader.h, today; xDS RateLimitConfig resources, one per domain, next), and
// ConfigValidator (config_validator.h) checks it and builds the Config the decision path reads.
// Nothing here judges a value: an empty key, an unknown unit or a burst on a fixed window are
// the validator's to refuse, with the same message whatever the source.
//
// Locations. A message about a field reads "<source>:<line>: <path>: <what>", where `source`
// is the DomainDescription's (a file name, an xDS resource name), `line` the field's own (0 when
// the source has no lines, which gives "<source>: <path>: <what>"), and `path` the field's place
// in the description, written the same for every source: "descriptors[0].rate_limits[1].burst"
// (ConfigMessage below).
//
// What a source could not read (a YAML list where a string belongs, an unknown key, a map
// nested too deeply) is kept where it was found, in `read_error`, instead of failing at once:
// the validator reports whichever problem, its own or the source's, comes first in its walk
// (domains in order; in a descriptor: key, value, flags, metadata, rules, then children). So a
// description's first error is the same however it was read, and a field the validator never
// reads (requests_per_unit of an unlimited rule, which is ignored) cannot fail a load. A source
// may stop reading at a problem on a descriptor, a rule or a list of them (nothing after it is
// visited): the YAML reader does, so that an alias cycle is not walked without end.
//
// Plain values: not thread-safe to mutate; several threads may read one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"

namespace sluice {

// Descriptor trees deeper than this (top-level descriptors are depth 1) are refused: nobody
// writes them, and a YAML alias can build a tree that contains itself.
inline constexpr int kMaxDescriptorDepth = 64;

// One field of a description.
template <typename T>
struct Field {
  bool given = false;
  // Meaningful when given and read_error is OK. A YAML null reads as the empty value.
  T value{};
  // 1-based line where the source gave the field (YAML: its key's); 0: the source has no lines.
  int line = 0;
  // Not OK: the field was given but could not be read as a T (the whole message, location
  // included); `value` is then unset.
  absl::Status read_error;
};

// One `replaces` entry of a rule: the name of a rule it overrides.
struct ReplaceDescription {
  int line = 0;
  // Not OK: the entry could not be read at all (not a map, an unknown key); `name` is unset.
  absl::Status read_error;
  Field<std::string> name;
};

// One rate limit: upstream's RateLimitPolicy and Sluice's extensions of it.
struct RuleDescription {
  int line = 0;  // YAML: the `rate_limit` key's line, or the `rate_limits` item's
  // Not OK: the rule could not be read at all (not a map, an unknown or repeated key); nothing
  // below is set.
  absl::Status read_error;

  // envoyproxy/ratelimit's fields.
  Field<std::string> unit;  // a unit's name in any case: "second", "MINUTE", ...
  Field<uint32_t> requests_per_unit;
  Field<bool> unlimited;
  Field<std::string> name;
  Field<std::vector<ReplaceDescription>> replaces;

  // Sluice's.
  Field<std::string> algorithm;  // an algorithm's name in any case: "token_bucket", ...
  Field<uint32_t> burst;
  Field<uint32_t> unit_multiplier;
  Field<std::string> hash_tag;
  Field<double> local_share;
  Field<std::string> charge;  // "if_admitted" or "always", in any case
};

// One descriptor: a key, a value or none, its rules, and the descriptors below it.
struct DescriptorDescription {
  int line = 0;  // YAML: the line of the list item
  // Not OK: the descriptor could not be read at all (not a map, an unknown or repeated key);
  // nothing below is set.
  absl::Status read_error;

  // envoyproxy/ratelimit's fields.
  Field<std::string> key;
  Field<std::string> value;  // a `*` in it makes it a wildcard
  Field<bool> shadow_mode;
  Field<bool> detailed_metric;
  Field<bool> quota_mode;
  Field<bool> value_to_metric;
  Field<bool> share_threshold;
  // Sluice's: returned as the response's dynamic metadata. Null or empty: none.
  Field<std::shared_ptr<const google::protobuf::Struct>> metadata;
  // The rule, as upstream gives it (`rate_limit`), set when given.
  std::optional<RuleDescription> rate_limit;
  // Sluice's: several rules of different algorithms or periods (`rate_limits`), exclusive of
  // `rate_limit`.
  Field<std::vector<RuleDescription>> rate_limits;
  Field<std::vector<DescriptorDescription>> descriptors;
};

// One domain: envoyproxy/ratelimit's file, or xDS RateLimitConfig resource.
struct DomainDescription {
  // The file or resource, first in every message about this domain.
  std::string source;
  // Where the description starts (YAML: the top-level map), for a missing `domain`.
  int line = 0;
  Field<std::string> domain;
  // Sluice's: "allow", "deny" or "local".
  Field<std::string> failure_mode;
  Field<std::vector<DescriptorDescription>> descriptors;
  // What the source took leniently, as envoyproxy/ratelimit takes it, where a stricter reading
  // refuses (a known key in the wrong place, ignored; a key given twice, the last kept): each a
  // whole message in ConfigMessage's form. The validator puts them first among the domain's
  // warnings (Config::warnings).
  std::vector<std::string> warnings;
};

// A whole configuration: domains in the order their sources are read. Under merge_domains,
// several may name one domain.
struct ConfigDescription {
  std::vector<DomainDescription> domains;
};

// "<source>:<line>", or just "<source>" when `line` is 0: where a domain or a descriptor was
// given, as listings and messages about two places write it.
std::string ConfigLocation(absl::string_view source, int line);
// "<location>: <path>: <what>" (ConfigLocation), without "<path>: " when `path` is empty: the
// form of every config error and warning.
std::string ConfigMessage(absl::string_view source, int line, absl::string_view path,
                          absl::string_view what);
// kInvalidArgument with ConfigMessage(...).
absl::Status ConfigError(absl::string_view source, int line, absl::string_view path,
                         absl::string_view what);

// A value of the config (a domain, a key, a descriptor value, a unit's name) as a message quotes
// it: "'<value>'", through LogText (log_text.h): escaped and cut to a size. A value may come from
// a management server, and messages reach the log and the NACK sent back.
std::string Quoted(absl::string_view value);
// Where a descriptor or rule given earlier is, for a message about a later one: "line <line>",
// or, from a source without lines (line 0), its path "descriptors[0].descriptors[2]".
std::string PlaceOf(int line, absl::string_view path);

// Paths as messages write them: FieldPath("descriptors[0]", "key") is "descriptors[0].key"
// (just "key" under the empty path), ItemPath("descriptors", 2) is "descriptors[2]".
std::string FieldPath(absl::string_view path, absl::string_view field);
std::string ItemPath(absl::string_view path, size_t index);

}  // namespace sluice
