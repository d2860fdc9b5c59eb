#include "server/common/env_flags.h"

#include <cstdlib>

#include "absl/strings/string_view.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status ApplyFlagsFromEnvironment(absl::string_view prefix,
                                       const std::vector<std::string>& flag_names) {
  for (const std::string& name : flag_names) {
    std::string variable = absl::StrCat(prefix, absl::AsciiStrToUpper(name));
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) {
      continue;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      return absl::InternalError(absl::StrCat("no flag named --", name));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", variable, "='", value, "': ", error));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
