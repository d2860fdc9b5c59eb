// The Lua scripts that run the rate-limit algorithms on Redis, composed from the parts in lua/
// and embedded into the binary at build time (lua/CMakeLists.txt, lua/embed.cmake). Each is
// ready for SCRIPT LOAD; lua/README.md holds their calling contract.
// Immutable static data; safe from any thread.
#pragma once

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sluice {

struct LuaScript {
  // "fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket",
  // "leaky_bucket", "gcra" (one key of that algorithm; AlgorithmName() of server/algorithm),
  // or "group" (several keys of any algorithms, decided all-or-nothing).
  absl::string_view name;
  absl::string_view source;  // the composed script's text
};

// Every composed script, sorted by name.
absl::Span<const LuaScript> LuaScripts();

}  // namespace sluice
