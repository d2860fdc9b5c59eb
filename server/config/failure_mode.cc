#include "server/config/failure_mode.h"

namespace sluice {

absl::string_view FailureModeName(FailureMode mode) {
  switch (mode) {
    case FailureMode::kAllow:
      return "allow";
    case FailureMode::kDeny:
      return "deny";
    case FailureMode::kLocal:
      return "local";
  }
  return "allow";  // unreachable for a valid enumerator
}

std::optional<FailureMode> ParseFailureMode(absl::string_view name) {
  for (FailureMode mode : {FailureMode::kAllow, FailureMode::kDeny, FailureMode::kLocal}) {
    if (name == FailureModeName(mode)) {
      return mode;
    }
  }
  return std::nullopt;
}

}  // namespace sluice
