#include "server/config/config_description.h"

#include "absl/strings/str_cat.h"
#include "server/common/log_text.h"

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

std::string Quoted(absl::string_view value) { return absl::StrCat("'", LogText(value), "'"); }

std::string PlaceOf(int line, absl::string_view path) {
  return line > 0 ? absl::StrCat("line ", line) : std::string(path);
}

std::string FieldPath(absl::string_view path, absl::string_view field) {
  return path.empty() ? std::string(field) : absl::StrCat(path, ".", field);
}

std::string ItemPath(absl::string_view path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

}  // namespace sluice
