// A bounded first pass over one YAML file, through the parser's events, before any node tree
// is built: what makes a file too costly or too odd to load is refused here, in a fraction of a
// second, instead of after the memory and time it asks for (a few hundred bytes of nested
// aliases ask for gigabytes once expanded). The config loader runs it on each file before
// yaml_config_reader.h reads the file. Stateless functions; a YamlBudget is for one thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/exceptions.h"

namespace sluice {

// What the YAML of one configuration may expand to, over all its files, and what has been
// counted so far. Nodes are maps, lists, keys and values; bytes are those of scalar text. An
// alias counts as the whole content of its anchor each time it is used, as reading it visits
// and copies it.
struct YamlBudget {
  int64_t max_nodes = 0;
  int64_t max_scalar_bytes = 0;
  int64_t nodes = 0;
  int64_t scalar_bytes = 0;
};

// Scans `text`, the whole of the file `file_name`, and refuses it (kInvalidArgument
// "<file>:<line>: [<field path>: ]<what>") at the first of:
//   - a YAML syntax error the parser reports, or nesting past the parser's own limit;
//   - a second document with content (one file holds one domain), unless `rest_ignored`;
//   - more than 64 documents, or a document that starts where the previous one started
//     (yaml-cpp 0.7 reports empty documents without end on some malformed input);
//   - nesting deeper than 256 levels;
//   - the expanded size of the configuration passing `budget`, which this file's count is
//     added to.
//
// With `rest_ignored`, a second document with content is not refused: the scan stops where it
// starts, as yaml.v2's Unmarshal reads a file's first document only (envoyproxy/ratelimit's
// reading), and *rest_ignored is set to a warning naming that line; nothing after it is read
// or counted. It is left alone when the file has one document.
absl::Status ScanYamlText(absl::string_view file_name, const std::string& text, YamlBudget& budget,
                          std::string* rest_ignored = nullptr);

// A yaml-cpp exception thrown while parsing `file_name` as kInvalidArgument "<file>:<line>:
// YAML syntax error: <what> (column <n>)", or, for the parser's depth limit, "<file>:<line>:
// YAML nested more than <n> levels deep (the parser's limit)".
absl::Status YamlExceptionError(absl::string_view file_name, const YAML::Exception& error);

}  // namespace sluice
