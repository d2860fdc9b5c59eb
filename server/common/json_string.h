// Text written as a JSON string, for the JSON log lines (logging.cc) and the --statsd_mogrifiers
// text upstream_env.cc writes (which YAML reads back: every JSON escape used here is a YAML one).
// Pure function; thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

// Appends `text` to `*out` as a JSON string, quotes included: '"' and '\' escaped, a newline as
// \n, any other control byte and DEL as \u00XX; every other byte as it is (UTF-8 passes through).
void AppendJsonString(absl::string_view text, std::string* out);

}  // namespace sluice
