// The whole content of a file a flag names (a certificate, a key, a snapshot), with an error
// that names the flag. Safe from any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

// The content of `path`; kInvalidArgument "--<flag>=<path>: cannot read it" when the file
// cannot be read or is empty.
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path);

// A secret a flag's file holds (a bearer token): its content without the whitespace around it
// (echo's newline); kInvalidArgument naming the flag when it cannot be read or holds nothing
// else.
absl::StatusOr<std::string> ReadSecretFile(absl::string_view flag, const std::string& path);

}  // namespace sluice
