#include "server/backend/storage_key.h"

namespace sluice {
namespace {

bool NeedsEscape(unsigned char c) {
  return c < 0x21 || c > 0x7e || c == '%' || c == '{' || c == '}' || c == '|' || c == '=';
}

void AppendEntry(const DescriptorEntryView& e, std::string* out) {
  out->push_back('|');
  AppendEscapedKeyPart(e.key, out);
  out->push_back('=');
  if (e.shared_pattern) {
    // A second '=' cannot start an escaped value, so a shared pattern never meets a literal.
    out->push_back('=');
  }
  AppendEscapedKeyPart(e.value, out);
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
                       absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix,
                       absl::string_view tag_key) {
  const DescriptorEntryView* tag = nullptr;
  if (!tag_key.empty()) {
    for (const DescriptorEntryView& e : entries) {
      if (e.key == tag_key) {
        tag = &e;
        break;
      }
    }
  }
  size_t size = prefix.size() + domain.size() + rule_suffix.size() + 4;
  for (const DescriptorEntryView& e : entries) {
    size += e.key.size() + e.value.size() + 3;
  }
  std::string key;
  key.reserve(size + size / 4 + (tag ? tag->key.size() + tag->value.size() + 2 : 0));
  key.append(prefix.data(), prefix.size());
  key.push_back('{');
  AppendEscapedKeyPart(domain, &key);
  if (tag == nullptr) {
    for (const DescriptorEntryView& e : entries) {
      AppendEntry(e, &key);
    }
    key.push_back('}');
  } else {
    AppendEntry(*tag, &key);
    key.push_back('}');
    for (const DescriptorEntryView& e : entries) {
      AppendEntry(e, &key);
    }
    key.push_back('|');
  }
  key.append(rule_suffix.data(), rule_suffix.size());
  return key;
}

absl::string_view HashTagOf(absl::string_view key) {
  size_t open = key.find('{');
  if (open == absl::string_view::npos) {
    return {};
  }
  size_t close = key.find('}', open + 1);
  if (close == absl::string_view::npos) {
    return {};
  }
  return key.substr(open + 1, close - open - 1);
}

}  // namespace sluice
