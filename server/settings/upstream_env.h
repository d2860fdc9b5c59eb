// envoyproxy/ratelimit's environment variables (its src/settings/settings.go), translated into
// Sluice flags, so that a Deployment written for envoyproxy/ratelimit starts Sluice unchanged.
// Each variable that is set maps onto the flag with the same behaviour, is accepted with a
// warning that says what Sluice does instead, or (when honouring it silently would be unsafe:
// memcache) is an error that names it. Where upstream's default behaviour is one Sluice has
// only when told (its log level, connection age, health that waits for Redis, debug port), any
// upstream variable set brings upstream's default too, as an assignment whose source says so.
// The standard OpenTelemetry variables upstream's tracer reads (OTEL_EXPORTER_OTLP_*,
// OTEL_BSP_*) are translated too, whenever they are set; they alone do not make the environment
// upstream's. docs/envoyproxy-ratelimit-settings.md and the README have the table.
//
// A pure function of the environment it is given; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace sluice {

struct FlagAssignment {
  std::string flag;    // a Sluice flag name without dashes, e.g. "grpc_address"
  std::string value;   // its text as on a command line
  std::string source;  // the variables it came from, e.g. "GRPC_HOST, GRPC_PORT"
};

struct UpstreamTranslation {
  std::vector<FlagAssignment> flags;
  // Set but not honoured, or honoured differently: one line each, naming the variable.
  std::vector<std::string> warnings;
  // Must stop the start: one line each, naming the variable and its value (never a password).
  std::vector<std::string> errors;
  // Whether the environment is upstream's: one of upstream's own variables is set (the standard
  // OTEL_* variables alone do not make it so). Then --default_config does not apply
  // (flag_layers.h): the rules are the ones upstream's variables name, or none.
  bool upstream_environment = false;
};

// The value of an environment variable, or nullopt when unset. Callers treat an empty value as
// unset.
using EnvLookup = std::function<std::optional<std::string>(absl::string_view name)>;

// Translates every upstream variable `env` has. Nothing set: an empty translation, and Sluice's
// own defaults stay. The caller applies `flags` before SLUICE_* variables and the command line.
UpstreamTranslation TranslateUpstreamEnvironment(const EnvLookup& env);

// The log line about `assignment` once every setting has been applied. `applied_value` is the
// flag's value right after the assignment, `final_value` its value in force, `overridden_by`
// the later setting that set the flag too ("SLUICE_HTTP_ADDRESS", "the command line"), or empty.
// While nothing overrode it: "--http_address=0.0.0.0:9000 from PORT". Otherwise the variable is
// not credited with what it did not set: "PORT: --http_address=0.0.0.0:9000 overridden by the
// command line (--http_address=127.0.0.1:8080 in force)". Password values are hidden.
std::string UpstreamAssignmentNote(const FlagAssignment& assignment,
                                   absl::string_view applied_value,
                                   absl::string_view final_value,
                                   absl::string_view overridden_by);

// Whether the command line `args` (argv without the program name) names `flag` the way
// absl::ParseCommandLine reads it: -flag or --flag, with "=VALUE", a separate value or none,
// or --noflag; arguments after "--" are not flags.
bool CommandLineNamesFlag(const std::vector<std::string>& args, absl::string_view flag);

}  // namespace sluice
