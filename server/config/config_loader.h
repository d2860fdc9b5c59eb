// Builds a Config from YAML: one file, a directory of *.yaml files, or text in memory. Errors
// are kInvalidArgument with a message naming the file, the line and the field, e.g.
//   "limits/api.yaml:12: rate_limit.unit: invalid unit 'fortnight' (expected second, minute,
//    hour, day, week, month or year)"
// Stateless functions; safe to call from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "server/config/config.h"

namespace sluice {

// Every failure is kInvalidArgument (including a missing path or an unreadable file), with
// "<file>:<line>: <field path>: <what is wrong>", e.g. "descriptors[0].rate_limits[1].burst"; the
// line is 1-based. The first error stops the load: nothing partial is ever returned. No exception
// escapes (yaml-cpp's are caught and turned into statuses).

struct ConfigLoadOptions {
  // Several files may define one domain; their descriptors are merged (a descriptor defined
  // twice is still an error). envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG.
  bool merge_domains = false;
  // A directory is read as envoyproxy/ratelimit's runtime loader reads its config directory:
  // every regular file below it, of any name, in subdirectories too (in path order). Names
  // starting with ".." (Kubernetes ConfigMap internals) are always skipped.
  bool recursive = false;
  // With `recursive`: also skip every other name starting with '.' (RUNTIME_IGNOREDOTFILES).
  bool ignore_dot_files = true;
};

// `path` is a YAML file (any name), or a directory. By default a directory's *.yaml and *.yml
// files directly inside it (not in subdirectories) are each one domain, loaded in name order;
// names starting with '.' are skipped (Kubernetes ConfigMap mounts keep ..data and
// ..<timestamp> there); a directory without any such file is an error. With
// options.recursive, see ConfigLoadOptions; an empty tree gives an empty Config. Symlinked files
// are followed, and a dangling symlink is an error. A path that does not exist is an error.
// File names in messages and in Domain::file are `path` / name.
absl::StatusOr<std::unique_ptr<Config>> LoadConfigPath(const std::string& path,
                                                       const ConfigLoadOptions& options = {});

// Parses one domain file's text. `file_name` is used in error messages only.
absl::StatusOr<std::unique_ptr<Config>> LoadConfigText(absl::string_view file_name,
                                                       absl::string_view text);

// A named YAML document, for loading several at once (a directory, or tests).
struct ConfigSource {
  std::string file_name;
  std::string text;
};
// Loads each source as one domain, in order; a domain defined twice is an error naming the
// first file unless options.merge_domains. An empty `sources` gives an empty Config.
absl::StatusOr<std::unique_ptr<Config>> LoadConfigSources(const std::vector<ConfigSource>& sources,
                                                          const ConfigLoadOptions& options = {});

}  // namespace sluice
