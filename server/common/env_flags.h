// Lets every flag be set from the environment: flag `--grpc_address` reads
// SLUICE_GRPC_ADDRESS. Call before absl::ParseCommandLine so the command line still wins.
// Not thread-safe: call once, early in main.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"

namespace sluice {

// For each name in `flag_names`, if the variable <prefix><NAME IN UPPER CASE> is set, parses
// it into the flag. Returns kInvalidArgument naming the variable if a value does not parse.
absl::Status ApplyFlagsFromEnvironment(absl::string_view prefix,
                                       const std::vector<std::string>& flag_names);

}  // namespace sluice
