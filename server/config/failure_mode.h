// What answers a descriptor the backend could not decide in its budget (Redis down, hung or
// slow): the --failure_mode flag, which a domain's `failure_mode:` overrides. Here, not in
// server/service/, because the config validator reads it and the decision path applies it.
// Pure functions; safe from any thread.
#pragma once

#include <optional>

#include "absl/strings/string_view.h"

namespace sluice {

// Numbered from 0 without gaps: Metrics keeps one counter per mode, indexed by the value.
enum class FailureMode {
  kAllow = 0,  // answer OK
  kDeny = 1,   // answer OVER_LIMIT
  // Decide in process, on this replica's share of each rule's limit (see
  // server/service/local_fallback.h).
  kLocal = 2,
};

// "allow", "deny", "local": as written in the flag and the YAML.
absl::string_view FailureModeName(FailureMode mode);
// The mode `name` spells (exactly, lower case); nullopt for anything else.
std::optional<FailureMode> ParseFailureMode(absl::string_view name);

}  // namespace sluice
