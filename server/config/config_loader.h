// Builds a Config from YAML: one file, a directory of *.yaml files, or text in memory. Each file
// is read into a domain description (yaml_config_reader.h) and checked by the validator every
// config source shares (config_validator.h), one file after the other. Errors are
// kInvalidArgument with a message naming the file, the line and the field, e.g.
//   "limits/api.yaml:12: rate_limit.unit: invalid unit 'fortnight' (expected second, minute,
//    hour, day, week, month or year)"
// Stateless functions; safe to call from any thread.
#pragma once

#include <cstdint>
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
  // Refuse what envoyproxy/ratelimit loads leniently (one of its keys out of place, a key given
  // twice, a null boolean or number, a second YAML document) instead of loading it with a
  // warning (yaml_config_reader.h). --strict_config.
  bool strict = false;
  // The backend's name when it keeps fixed windows only (ValidateOptions::fixed_windows_only).
  std::string fixed_windows_only{};

  // Bounds on what a config may cost to load, far above any real config, so that a hostile
  // or broken one is refused in a fraction of a second instead of taking the memory and time
  // it asks for (a few hundred bytes of nested YAML aliases can ask for gigabytes).
  // A file (or a ConfigSource's text) larger than this is refused before it is parsed.
  int64_t max_file_bytes = int64_t{4} << 20;
  // YAML nodes (maps, lists, keys and values) over all files, with every alias counted as the
  // whole content of its anchor each time it is used, as loading visits and copies it.
  int64_t max_nodes = 1'000'000;
  // Bytes of scalar text (keys and values) over all files, aliases counted the same way.
  int64_t max_scalar_bytes = int64_t{32} << 20;
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

// Parses one domain file's text, with the default ConfigLoadOptions. `file_name` is used in
// error messages only.
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
