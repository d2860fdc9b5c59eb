// Debian 12 builds abseil with its own absl::string_view (not std::string_view), while the Redis
// client takes std::string_view. This is the project's one conversion between the two.
// Header-only; no state.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace sluice {

inline std::string_view StdView(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

}  // namespace sluice
