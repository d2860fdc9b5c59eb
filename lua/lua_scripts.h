// The Lua scripts of lua/*.lua, embedded into the binary at build time (lua/embed.cmake).
// Immutable static data; safe from any thread.
#pragma once


#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sluice {

struct LuaScript {
  absl::string_view name;    // file name without ".lua", e.g. "token_bucket"
  absl::string_view source;  // the script's text
};

// Every embedded script, sorted by name.
absl::Span<const LuaScript> LuaScripts();

}  // namespace sluice
