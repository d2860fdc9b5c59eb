#include "server/config/wildcard.h"

#include <cstddef>

#include "absl/strings/string_view.h"

namespace sluice {

bool WildcardMatch(absl::string_view pattern, absl::string_view text) {
  // Greedy scan that remembers the last `*` seen: on a mismatch, let that star swallow one more
  // character and retry from just after it. Earlier stars never need revisiting, because the
  // last star can absorb anything an earlier one could have (the classic linear-space glob).
  size_t p = 0;
  size_t t = 0;
  size_t star = absl::string_view::npos;  // position of the last `*` in pattern
  size_t star_t = 0;                     // text position that star currently matches up to
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_t = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

}  // namespace sluice
