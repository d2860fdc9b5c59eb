#include "server/key/upstream_key.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/algorithm/fixed_window.h"

namespace sluice {
namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// Appends `escaped` (AppendEscapedKeyPart's form) decoded; false on a malformed escape or a
// byte that the escaped form never holds raw.
bool AppendUnescaped(absl::string_view escaped, std::string* out) {
  for (size_t i = 0; i < escaped.size(); ++i) {
    const char c = escaped[i];
    if (c == '{' || c == '}' || c == '|' || c == '=') {
      return false;
    }
    if (c != '%') {
      out->push_back(c);
      continue;
    }
    if (i + 2 >= escaped.size()) {
      return false;
    }
    const int high = HexDigit(escaped[i + 1]);
    const int low = HexDigit(escaped[i + 2]);
    if (high < 0 || low < 0) {
      return false;
    }
    out->push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return true;
}

// Appends "<key>_<value>_" for each "|k=v" (or "|k==pattern") of `entries`.
bool AppendEntries(absl::string_view entries, std::string* out) {
  while (!entries.empty()) {
    if (entries.front() != '|') {
      return false;
    }
    entries.remove_prefix(1);
    const size_t next = entries.find('|');
    absl::string_view entry = entries.substr(0, next);
    entries = next == absl::string_view::npos ? absl::string_view() : entries.substr(next);
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      return false;
    }
    absl::string_view value = entry.substr(eq + 1);
    if (!value.empty() && value.front() == '=') {
      value.remove_prefix(1);  // a share_threshold pattern: upstream writes the pattern too
    }
    if (!AppendUnescaped(entry.substr(0, eq), out)) {
      return false;
    }
    out->push_back('_');
    if (!AppendUnescaped(value, out)) {
      return false;
    }
    out->push_back('_');
  }
  return true;
}

}  // namespace

absl::string_view KeyLayoutName(KeyLayout layout) {
  return layout == KeyLayout::kUpstream ? "upstream" : "sluice";
}

std::optional<KeyLayout> ParseKeyLayout(absl::string_view name) {
  for (KeyLayout layout : {KeyLayout::kSluice, KeyLayout::kUpstream}) {
    if (name == KeyLayoutName(layout)) {
      return layout;
    }
  }
  return std::nullopt;
}

int64_t UpstreamWindowTtlSeconds(const LimitParams& params, int64_t now_us) {
  const int64_t rest_us =
      params.calendar_months ? FixedWindowAt(params, now_us).end_us - now_us : params.period_us;
  return std::max<int64_t>(1, (rest_us + kMicrosPerSecond - 1) / kMicrosPerSecond);
}

bool IsUpstreamUnitPeriod(int64_t period_us) {
  for (int64_t seconds : {int64_t{1}, int64_t{60}, int64_t{3600}, int64_t{86400},
                          int64_t{604800}, int64_t{2592000}, int64_t{31536000}}) {
    if (period_us == seconds * kMicrosPerSecond) {
      return true;
    }
  }
  return false;
}

bool AppendUpstreamWindowKey(absl::string_view storage_key, absl::string_view prefix,
                             const LimitParams& params, int64_t now_us, std::string* out) {
  if (storage_key.substr(0, prefix.size()) != prefix) {
    return false;
  }
  absl::string_view rest = storage_key.substr(prefix.size());
  if (rest.empty() || rest.front() != '{') {
    return false;
  }
  rest.remove_prefix(1);
  const size_t close = rest.find('}');
  if (close == absl::string_view::npos) {
    return false;
  }
  absl::string_view tagged = rest.substr(0, close);  // domain, then the tag's entries
  absl::string_view after = rest.substr(close + 1);
  const size_t domain_end = tagged.find('|');
  absl::string_view domain = tagged.substr(0, domain_end);
  absl::string_view entries =
      domain_end == absl::string_view::npos ? absl::string_view() : tagged.substr(domain_end);
  if (!after.empty() && after.front() == '|') {
    // hash_tag layout: the whole descriptor follows the tag, then '|' and the rule suffix.
    const size_t last = after.rfind('|');
    if (last == 0) {
      return false;
    }
    entries = after.substr(0, last);
  }
  const size_t size_before = out->size();
  out->append(prefix.data(), prefix.size());
  if (!AppendUnescaped(domain, out)) {
    out->resize(size_before);
    return false;
  }
  out->push_back('_');
  if (!AppendEntries(entries, out)) {
    out->resize(size_before);
    return false;
  }
  const int64_t period_s = params.period_us / kMicrosPerSecond;
  // Upstream's periods are whole seconds, so the window starts on one: floor(now_s / P) * P.
  const int64_t start_us = FixedWindowAt(params, now_us).start_us;
  absl::StrAppend(out, start_us >= 0 ? start_us / kMicrosPerSecond
                                     : -((-start_us + kMicrosPerSecond - 1) / kMicrosPerSecond));
  if (params.shares_descriptor || !IsUpstreamUnitPeriod(params.period_us)) {
    absl::StrAppend(out, "_", period_s, "s");
  }
  return true;
}

}  // namespace sluice
