#include "server/common/log_text.h"

#include "absl/strings/str_cat.h"

namespace sluice {

std::string LogText(absl::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const absl::string_view shown = text.substr(0, max_bytes);
  std::string out;
  out.reserve(shown.size() + 16);
  for (char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out.append("\\\\");
    } else if (c < 0x20 || c >= 0x7f) {
      out.append("\\x");
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(ch);
    }
  }
  if (shown.size() < text.size()) {
    absl::StrAppend(&out, "...(", text.size(), " bytes)");
  }
  return out;
}

std::string LogStatus(const absl::Status& status, size_t max_bytes) {
  if (status.ok()) {
    return "OK";
  }
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                      LogText(status.message(), max_bytes));
}

}  // namespace sluice
