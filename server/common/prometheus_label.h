// Label values in the Prometheus text exposition format: a backslash, a double quote and a
// newline are escaped (\\, \", \n); every other byte is written as it is. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

// The bytes `value` takes once escaped.
inline size_t EscapedLabelValueSize(absl::string_view value) {
  size_t size = value.size();
  for (char c : value) {
    size += (c == '\\' || c == '"' || c == '\n') ? 1 : 0;
  }
  return size;
}

// Appends `value`, escaped, to *out.
inline void AppendLabelValue(absl::string_view value, std::string* out) {
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace sluice
