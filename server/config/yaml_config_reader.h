// Reads envoyproxy/ratelimit's YAML config format, with Sluice's extensions, into domain
// descriptions (config_description.h): one file's text, one domain. Everything YAML decides is
// decided here: syntax, the document count, nesting, the expansion budget of aliases (through
// yaml_document_scanner.h), the keys allowed in each map, repeated keys, merge keys, and the
// type of each scalar (yaml_fields.h). Whether the values make a valid configuration is
// ConfigValidator's to say (config_validator.h).
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
  // file this reader reads.
  YamlConfigReader(int64_t max_nodes, int64_t max_scalar_bytes);

  // Reads `text`, the whole of the file `file_name`, as one domain. Problems of the file as a
  // whole are returned (kInvalidArgument "<file>:<line>: [<field path>: ]<what>"): those
  // ScanYamlText finds, an empty file, a top level that is not a map, and a top-level key that
  // is unknown, repeated or a bad merge key. Problems inside (a field of the wrong type, an
  // unknown key in a descriptor, descriptors nested more than kMaxDescriptorDepth deep) are
  // kept in the description's read_error fields, in the same form, for the validator to report
  // in its order; reading stops at the first one on a descriptor, a rule or a list of them.
  // yaml-cpp's parse errors become statuses; other exceptions (bad_alloc) propagate.
  absl::StatusOr<DomainDescription> Read(absl::string_view file_name, absl::string_view text);

 private:
  YamlBudget budget_;
};

}  // namespace sluice
