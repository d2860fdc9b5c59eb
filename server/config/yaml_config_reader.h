// Reads envoyproxy/ratelimit's YAML config format, with Sluice's extensions, into domain
// descriptions (config_description.h): one file's text, one domain. Everything YAML decides is
// decided here: syntax, the document count, nesting, the expansion budget of aliases (through
// yaml_document_scanner.h), the keys allowed in each map, repeated keys, merge keys, and the
// type of each scalar (yaml_fields.h). Whether the values make a valid configuration is
// ConfigValidator's to say (config_validator.h).
//
// A file envoyproxy/ratelimit loads is read, by default, as it reads it (yaml.v2's non-strict
// Unmarshal after its validateYamlKeys, src/config/config_impl.go), each leniency a warning in
// the description's `warnings` naming file, line and key:
//   - one of upstream's keys in a map it does not belong to (`shadow_mode` under `rate_limit:`,
//     `unit` on a descriptor, `key` at the top) is ignored, as upstream ignores it; its value
//     must still pass upstream's checks (its keys upstream's, no float);
//   - a key given twice in one map: the last one given is used;
//   - a null where a boolean or an integer of upstream's belongs reads as false or 0, and an
//     empty `rate_limit:` as no limit;
//   - a second YAML document: the file is its first (yaml.v2's Unmarshal reads no further).
// A key that is nobody's (upstream refuses it too), or one of Sluice's own keys out of place,
// is an error. `strict` (--strict_config) refuses every leniency above instead.
//
// A YamlConfigReader is used by one thread at a time.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config/config_description.h"
#include "server/config/yaml_document_scanner.h"

namespace sluice {

class YamlConfigReader {
 public:
  // The budget of YAML nodes and scalar bytes, aliases expanded (see YamlBudget), is for every
  // file this reader reads. `strict`: see the file comment.
  YamlConfigReader(int64_t max_nodes, int64_t max_scalar_bytes, bool strict = false);

  // Reads `text`, the whole of the file `file_name`, as one domain. Problems of the file as a
  // whole are returned (kInvalidArgument "<file>:<line>: [<field path>: ]<what>"): those
  // ScanYamlText finds, an empty file, a top level that is not a map, and a top-level key that
  // is unknown, out of place (strict), repeated (strict) or a bad merge key. Problems inside
  // (a field of the wrong type, an unknown key in a descriptor, descriptors nested more than
  // kMaxDescriptorDepth deep) are kept in the description's read_error fields, in the same
  // form, for the validator to report in its order; reading stops at the first one on a
  // descriptor, a rule or a list of them. What was read leniently is in its `warnings`.
  // yaml-cpp's parse errors become statuses; other exceptions (bad_alloc) propagate.
  absl::StatusOr<DomainDescription> Read(absl::string_view file_name, absl::string_view text);

 private:
  YamlBudget budget_;
  const bool strict_;
};

}  // namespace sluice
