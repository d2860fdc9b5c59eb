#include "server/key/storage_key.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/algorithm/fixed_window.h"

namespace sluice {
namespace {

constexpr bool NeedsEscapeSlow(unsigned char c) {
  return c < 0x21 || c > 0x7e || c == '%' || c == '{' || c == '}' || c == '|' || c == '=';
}

// NeedsEscapeSlow by table: one load per byte of every key part.
struct EscapeTable {
  bool needs[256] = {};
  constexpr EscapeTable() {
    for (int c = 0; c < 256; ++c) {
      needs[c] = NeedsEscapeSlow(static_cast<unsigned char>(c));
    }
  }
};
constexpr EscapeTable kEscapeTable;

bool NeedsEscape(unsigned char c) { return kEscapeTable.needs[c]; }

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
  // Runs that need no escape (every byte, usually) are appended whole.
  const char* run = text.data();
  const char* const end = text.data() + text.size();
  for (const char* p = run; p != end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (NeedsEscape(c)) {
      out->append(run, static_cast<size_t>(p - run));
      const char escaped[3] = {'%', kHex[c >> 4], kHex[c & 0xf]};
      out->append(escaped, 3);
      run = p + 1;
    }
  }
  out->append(run, static_cast<size_t>(end - run));
}

size_t StorageKeySizeHint(absl::string_view prefix, absl::string_view domain,
                          absl::Span<const DescriptorEntryView> entries,
                          absl::string_view rule_suffix) {
  // Braces, the separators and the shared pattern's second '=': 4 + 3 per entry; a tag repeats
  // one entry (counted as one more entry).
  size_t size = prefix.size() + domain.size() + rule_suffix.size() + 4;
  size_t longest = 0;
  for (const DescriptorEntryView& e : entries) {
    size += e.key.size() + e.value.size() + 3;
    longest = std::max(longest, e.key.size() + e.value.size() + 3);
  }
  return size + longest;
}

std::string StorageKey(absl::string_view prefix, absl::string_view domain,
                       absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix,
                       absl::string_view tag_key) {
  std::string key;
  key.reserve(StorageKeySizeHint(prefix, domain, entries, rule_suffix));
  AppendStorageKey(prefix, domain, entries, rule_suffix, tag_key, &key);
  return key;
}

void AppendStorageKey(absl::string_view prefix, absl::string_view domain,
                      absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix,
                      absl::string_view tag_key, std::string* out) {
  const DescriptorEntryView* tag = nullptr;
  if (!tag_key.empty()) {
    for (const DescriptorEntryView& e : entries) {
      if (e.key == tag_key) {
        tag = &e;
        break;
      }
    }
  }
  out->append(prefix.data(), prefix.size());
  out->push_back('{');
  AppendEscapedKeyPart(domain, out);
  if (tag == nullptr) {
    for (const DescriptorEntryView& e : entries) {
      AppendEntry(e, out);
    }
    out->push_back('}');
  } else {
    AppendEntry(*tag, out);
    out->push_back('}');
    for (const DescriptorEntryView& e : entries) {
      AppendEntry(e, out);
    }
    out->push_back('|');
  }
  out->append(rule_suffix.data(), rule_suffix.size());
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
    case Algorithm::kConcurrency:
      code = "cc";
      break;
  }
  return absl::StrCat(code, ":", period_seconds);
}

std::string OverrideKeySuffix(int64_t period_seconds, uint64_t limit) {
  return absl::StrCat(RuleKeySuffix(Algorithm::kFixedWindow, period_seconds), ":l", limit);
}

void AppendFixedWindowKey(absl::string_view base, const LimitParams& params, int64_t now_us,
                          std::string* out) {
  absl::StrAppend(out, base, params.calendar_months ? ":m" : ":w",
                  FixedWindowAt(params, now_us).index);
}

}  // namespace sluice
