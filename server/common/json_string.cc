#include "server/common/json_string.h"

#include <cstdio>

namespace sluice {

void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c < 0x20 || c == 0x7f) {
      // DEL too: JSON would take it raw, but YAML (which reads the mogrifiers' text) does not.
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out->append(escaped);
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

}  // namespace sluice
