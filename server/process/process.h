// The process from its settings to its exit code, as Envoy's main_common turns options into a
// server: the log as the settings say, the initial config (--check_config prints it and ends
// here, having bound nothing and started no thread), the assembly (assembly.h) and the
// lifecycle (lifecycle.h). server/main.cc's main() loads the settings and calls RunProcess.
//
// Not thread-safe: call once, from main.
#pragma once

#include "server/settings/load_settings.h"

namespace sluice {

// Runs the server described by `loaded` until it is stopped. Returns the exit code: 0 once
// drained (or --check_config with a valid config); 1 after printing "sluice: <what failed>"
// to stderr. REQUIRES: `loaded.errors` is empty.
int RunProcess(const LoadedSettings& loaded);

}  // namespace sluice
