#include "absl/strings/string_view.h"
#include "server/backend/storage_key.h"

namespace sluice {
namespace {

bool NeedsEscape(unsigned char c) {
  return c < 0x21 || c > 0x7e || c == '%' || c == '{' || c == '}' || c == '|' || c == '=';
}

}  // namespace

void AppendEscapedKeyPart(absl::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (NeedsEscape(c)) {
      out->push_back('%');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xf]);
    } else {
      out->push_back(ch);
    }
  }
}

std::string StorageKey(absl::string_view prefix, absl::string_view domain,
                       absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix) {
  size_t size = prefix.size() + domain.size() + rule_suffix.size() + 2;
  for (const DescriptorEntryView& e : entries) {
    size += e.key.size() + e.value.size() + 2;
  }
  std::string key;
  key.reserve(size + size / 4);
  key.append(prefix.data(), prefix.size());
  key.push_back('{');
  AppendEscapedKeyPart(domain, &key);
  for (const DescriptorEntryView& e : entries) {
    key.push_back('|');
    AppendEscapedKeyPart(e.key, &key);
    key.push_back('=');
    AppendEscapedKeyPart(e.value, &key);
  }
  key.push_back('}');
  key.append(rule_suffix.data(), rule_suffix.size());
  return key;
}

}  // namespace sluice
