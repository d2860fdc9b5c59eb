#include "server/config/config_description.h"

#include "absl/strings/str_cat.h"

namespace sluice {

std::string ConfigLocation(absl::string_view source, int line) {
  return line > 0 ? absl::StrCat(source, ":", line) : std::string(source);
}

std::string ConfigMessage(absl::string_view source, int line, absl::string_view path,
                          absl::string_view what) {
  std::string message = ConfigLocation(source, line);
  absl::StrAppend(&message, ": ");
  if (!path.empty()) {
    absl::StrAppend(&message, path, ": ");
  }
  absl::StrAppend(&message, what);
  return message;
}

absl::Status ConfigError(absl::string_view source, int line, absl::string_view path,
                         absl::string_view what) {
  return absl::InvalidArgumentError(ConfigMessage(source, line, path, what));
}

std::string FieldPath(absl::string_view path, absl::string_view field) {
  return path.empty() ? std::string(field) : absl::StrCat(path, ".", field);
}

std::string ItemPath(absl::string_view path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

}  // namespace sluice
