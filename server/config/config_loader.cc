#include "server/config/config_loader.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/common/status_macros.h"
#include "server/config/config_description.h"
#include "server/config/config_validator.h"
#include "server/config/yaml_config_reader.h"

namespace sluice {
namespace {

absl::Status FileTooLarge(absl::string_view file, int64_t max_bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": file is larger than ", max_bytes,
                   " bytes (--config_max_file_bytes); not parsed"));
}

// Reads at most `max_bytes` (a file that is larger, or grows past it while read, is refused
// without reading the rest).
absl::Status ReadFile(const std::string& path, int64_t max_bytes, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  out.clear();
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    out.append(chunk, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(out.size()) > max_bytes) {
      return FileTooLarge(path, max_bytes);
    }
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", std::strerror(errno)));
  }
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
    RETURN_IF_ERROR(ReadFile(source.file_name, options.max_file_bytes, source.text));
  }
  return sources;
}

absl::StatusOr<std::unique_ptr<Config>> LoadSources(const std::vector<ConfigSource>& sources,
                                                    const ConfigLoadOptions& options) {
  YamlConfigReader reader(options.max_nodes, options.max_scalar_bytes, options.strict);
  ConfigValidator validator(
      ValidateOptions{.merge_domains = options.merge_domains,
                      .fixed_windows_only = options.fixed_windows_only});
  // One file at a time, read then validated: a file's errors come before the next one's.
  for (const ConfigSource& source : sources) {
    if (static_cast<int64_t>(source.text.size()) > options.max_file_bytes) {
      return FileTooLarge(source.file_name, options.max_file_bytes);
    }
    try {
      ASSIGN_OR_RETURN(DomainDescription domain, reader.Read(source.file_name, source.text));
      RETURN_IF_ERROR(validator.AddDomain(std::move(domain)));
    } catch (const std::exception& e) {
      // Only a yaml-cpp surprise (or bad_alloc) can land here; still name the file.
      return absl::InvalidArgumentError(
          absl::StrCat(source.file_name, ":1: cannot load: ", e.what()));
    }
  }
  return validator.Finish();
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
