#include "server/common/flag_file.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice {

absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", path, ": cannot read it"));
  }
  return text.str();
}

absl::StatusOr<std::string> ReadSecretFile(absl::string_view flag, const std::string& path) {
  absl::StatusOr<std::string> content = ReadFlagFile(flag, path);
  if (!content.ok()) {
    return content.status();
  }
  std::string secret(absl::StripAsciiWhitespace(*content));
  if (secret.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": holds no token (only whitespace)"));
  }
  return secret;
}

}  // namespace sluice
