// Checks the rules of one descriptor description (config_description.h) and builds their
// RateLimitRules: unit, limit, algorithm, burst, period, local share, name and replaces of
// each, and the rules of one descriptor among themselves. Whatever the source, a rule gets the
// same checks, the same messages and the same warnings. Stateless functions; safe to call from
// any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config/config.h"
#include "server/config/config_description.h"

namespace sluice {

// Checks one rule and builds it: the period is unit * unit_multiplier, the burst (of the
// bucket algorithms and GCRA) defaults to the limit, the key suffix follows from algorithm and
// period. `path` is the rule's ("descriptors[0].rate_limits[1]"), `source` the domain
// description's. The first problem, the description's own read errors included, is returned as
// kInvalidArgument "<source>:<line>: <path>.<field>: <what>". Things accepted as
// envoyproxy/ratelimit accepts them but probably not meant (a missing requests_per_unit, a
// limit of 0; a sliding_window_log key that can pass 1 MiB) are appended to `warnings` in the
// same form. Moves strings out of `description`.
absl::StatusOr<RateLimitRule> ValidateRule(RuleDescription& description, absl::string_view source,
                                           absl::string_view path,
                                           std::vector<std::string>& warnings);

// Checks the rules of `descriptor` (its rate_limit, or its rate_limits, never both) and appends
// them to `rules` in order. Two rules of one algorithm and period would share one counter and
// are refused; an unlimited rule must be the only one. `path` is the descriptor's
// ("descriptors[0]"). Errors and warnings as ValidateRule's.
absl::Status ValidateDescriptorRules(DescriptorDescription& descriptor, absl::string_view source,
                                     absl::string_view path, std::vector<std::string>& warnings,
                                     std::vector<RateLimitRule>& rules);

}  // namespace sluice
