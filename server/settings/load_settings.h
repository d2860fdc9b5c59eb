// The process's settings from its own command line and environment: parses the command line
// (abseil flags), layers envoyproxy/ratelimit's variables, SLUICE_* variables and the command
// line (flag_layers.h), and reads the result into Settings (setting_flags.h). Nothing else in
// the server reads a flag or the environment for a setting.
//
// Not thread-safe: call once, early in main, before any thread starts.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/settings/settings.h"

namespace sluice {

struct LoadedSettings {
  Settings settings;  // meaningful only when `errors` is empty
  // Everything wrong, one message each (a message may span lines): the start must stop.
  std::vector<std::string> errors;
  // For the log once it is configured: what each upstream variable set, and which of them
  // are not honoured.
  std::vector<std::string> upstream_notes;
  std::vector<std::string> upstream_warnings;
  // For the log: that --default_config stood in for --config (flag_layers.h), or empty.
  std::string default_config_note;
};

// Parses `argv` with absl::ParseCommandLine (which prints --help and reports a malformed
// command line itself, exiting), then builds the settings from the flags `flags_file` defines
// (pass __FILE__ from the file that defines them) and the process environment. Also an error:
// a flag `flags_file` defines that Settings does not read, or the other way round, or one
// whose type differs from Settings' (programming errors, found by any run).
LoadedSettings LoadSettings(int argc, char** argv, absl::string_view flags_file);

}  // namespace sluice
