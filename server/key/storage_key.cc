#include "server/key/storage_key.h"

#include "absl/strings/str_cat.h"
#include "server/algorithm/algorithm_internal.h"

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

std::string RuleKeySuffix(Algorithm algorithm, int64_t period_seconds) {
  absl::string_view code = "unknown";
  switch (algorithm) {
    case Algorithm::kFixedWindow:
      code = "fw";
      break;
    case Algorithm::kSlidingWindowLog:
      code = "swl";
      break;
    case Algorithm::kSlidingWindowCounter:
      code = "swc";
      break;
    case Algorithm::kTokenBucket:
      code = "tb";
      break;
    case Algorithm::kLeakyBucket:
      code = "lb";
      break;
    case Algorithm::kGcra:
      code = "gcra";
      break;
  }
  return absl::StrCat(code, ":", period_seconds);
}

void AppendFixedWindowKey(absl::string_view base, int64_t now_us, int64_t period_us,
                          std::string* out) {
  const int64_t index = algorithm_internal::WindowStart(now_us, period_us) / period_us;
  absl::StrAppend(out, base, ":w", index);
}

}  // namespace sluice
