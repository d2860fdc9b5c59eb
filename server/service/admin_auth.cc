#include "server/service/admin_auth.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace sluice {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of the longer one is read once, whatever the content.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  uint8_t difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    const uint8_t y = i < b.size() ? static_cast<uint8_t>(b[i]) : 0;
    difference |= static_cast<uint8_t>(x ^ y);
  }
  // Read through a volatile so that the loop is not cut short at the first difference.
  volatile uint8_t result = difference;
  return result == 0;
}

bool AdminAuthorized(const char* authorization, absl::string_view token) {
  if (token.empty()) {
    return true;
  }
  if (authorization == nullptr) {
    return false;
  }
  absl::string_view value = absl::StripAsciiWhitespace(authorization);
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return false;
  }
  value.remove_prefix(kScheme.size());
  return ConstantTimeEquals(absl::StripLeadingAsciiWhitespace(value), token);
}

}  // namespace sluice
