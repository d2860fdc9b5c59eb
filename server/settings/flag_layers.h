// The precedence of the places a setting can come from, lowest first: envoyproxy/ratelimit's
// environment variables (translated by upstream_env.h), then SLUICE_<FLAG> variables, then the
// command line. Layering gives each flag Settings reads its value in force and where it came
// from, every error on the way (all of them, not the first), and the log lines that say what
// the upstream variables did.
//
// Two steps, because abseil parses the command line: LayerEnvironment, then (once the command
// line is parsed on top of what the environment set) LayerCommandLine.
//
// The default config. Once every layer is applied, --default_config (the image sets it as
// SLUICE_DEFAULT_CONFIG, in place of a default command) becomes --config when nothing names the
// rules (--config unset or empty, --config_source not xds) and none of upstream's own variables
// is set. Under upstream's variables it never applies, so the image run with no command reads
// them exactly as `/bin/ratelimit` with no arguments does: their RUNTIME_* directory, xDS with
// CONFIG_TYPE, or, naming neither, no rules (the start stops, saying so). A native run that
// does not set --default_config is untouched, and an explicit --config or SLUICE_CONFIG always
// wins.
//
// Pure functions of the environment and command line they are given; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "server/settings/setting_flags.h"
#include "server/settings/upstream_env.h"

namespace sluice {

struct LayeredFlags {
  // The flags some layer set, with their value in force (flags absent keep their defaults).
  FlagTexts flags;
  // One message each: upstream's variables Sluice cannot honour (one message, a line each),
  // then each value that does not parse as its flag's type, naming the variable it came from.
  // A value that does not parse is not applied.
  std::vector<std::string> errors;
  // After LayerCommandLine: for each flag an upstream variable set, whether it is in force or
  // what overrode it (UpstreamAssignmentNote).
  std::vector<std::string> notes;
  // Upstream's variables that are set but not honoured, one line each.
  std::vector<std::string> warnings;
  // What the upstream variables set, with the text each flag then had, for the notes.
  std::vector<std::pair<FlagAssignment, std::string>> upstream;
  // Whether one of upstream's own variables is set (UpstreamTranslation::upstream_environment).
  bool upstream_environment = false;
  // After LayerCommandLine: the log line saying that --default_config stood in for --config,
  // or empty when it did not.
  std::string default_config_note;
};

// The environment's layers. `env` returns a variable's value as it is (a SLUICE_* variable set
// to "" sets its flag to ""; upstream's variables treat "" as unset), nullopt when unset. The
// texts in `flags` are as their flags print them ("yes" -> "true").
LayeredFlags LayerEnvironment(const EnvLookup& env);

// The command line on top of `layered`, which LayerEnvironment(env) made: `command_line` maps
// each flag the command line set to its text. Adds the notes, then applies the default config
// (above): `flags["config"]` is then --default_config's text, credited to what set that.
void LayerCommandLine(const std::map<std::string, std::string>& command_line, const EnvLookup& env,
                      LayeredFlags& layered);

// Both steps at once.
LayeredFlags LayerFlags(const EnvLookup& env,
                        const std::map<std::string, std::string>& command_line);

}  // namespace sluice
