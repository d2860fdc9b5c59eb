#include "server/trace/trace_context.h"

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/strings/str_split.h"

namespace sluice {
namespace {

// traceparent version 00: "00-" 32 hex "-" 16 hex "-" 2 hex.
constexpr size_t kTraceparentBytes = 55;
constexpr size_t kTraceIdOffset = 3;
constexpr size_t kSpanIdOffset = 36;
constexpr size_t kFlagsOffset = 53;
constexpr size_t kMaxTraceStateBytes = 512;
constexpr size_t kMaxTraceStateMembers = 32;
constexpr size_t kMaxTraceStateValueBytes = 256;

// HTTP's optional whitespace (RFC 9110): spaces and horizontal tabs.
bool IsOws(char c) { return c == ' ' || c == '\t'; }

absl::string_view TrimOws(absl::string_view text) {
  while (!text.empty() && IsOws(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && IsOws(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

// The value of a lower-case hex digit, or -1: both formats reject upper case.
int LowerHexDigit(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  return -1;
}

bool IsLowerHex(absl::string_view text) {
  for (char c : text) {
    if (LowerHexDigit(c) < 0) {
      return false;
    }
  }
  return true;
}

// Decodes `hex` into the last hex.size() / 2 bytes of `id`, the bytes before it zero (B3's
// 64-bit trace ids are the low half of a 128-bit one). False unless `hex` is lower-case hex of
// an even length that fits and the id is not all zeros.
template <size_t N>
bool DecodeId(absl::string_view hex, std::array<uint8_t, N>& id) {
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() > 2 * N) {
    return false;
  }
  id = {};
  const size_t first = N - hex.size() / 2;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = LowerHexDigit(hex[i]);
    const int low = LowerHexDigit(hex[i + 1]);
    if (high < 0 || low < 0) {
      return false;
    }
    id[first + i / 2] = static_cast<uint8_t>((high << 4) | low);
  }
  return id != std::array<uint8_t, N>{};
}

// A B3 trace id: 32 hex digits, or 16 (64 bits, padded).
bool DecodeB3TraceId(absl::string_view hex, TraceId& id) {
  return (hex.size() == 32 || hex.size() == 16) && DecodeId(hex, id);
}

bool DecodeSpanId(absl::string_view hex, SpanId& id) {
  return hex.size() == 16 && DecodeId(hex, id);
}

std::optional<TraceContext> ParseTraceparent(absl::string_view value) {
  value = TrimOws(value);
  if (value.size() < kTraceparentBytes) {
    return std::nullopt;
  }
  const absl::string_view version = value.substr(0, 2);
  if (!IsLowerHex(version) || version == "ff") {
    return std::nullopt;
  }
  // Version 00 is exactly its four fields; a later version may append fields after a '-',
  // which a version-00 parser skips.
  if (version == "00" ? value.size() != kTraceparentBytes
                      : value.size() > kTraceparentBytes && value[kTraceparentBytes] != '-') {
    return std::nullopt;
  }
  if (value[kTraceIdOffset - 1] != '-' || value[kSpanIdOffset - 1] != '-' ||
      value[kFlagsOffset - 1] != '-') {
    return std::nullopt;
  }
  TraceContext context;
  if (!DecodeId(value.substr(kTraceIdOffset, 32), context.trace_id) ||
      !DecodeId(value.substr(kSpanIdOffset, 16), context.span_id)) {
    return std::nullopt;
  }
  const absl::string_view flags = value.substr(kFlagsOffset, 2);
  if (!IsLowerHex(flags)) {
    return std::nullopt;
  }
  context.sampled = (LowerHexDigit(flags[1]) & 1) != 0;
  return context;
}

// tracestate key characters after the first: lcalpha / DIGIT / "_" / "-" / "*" / "/".
bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' ||
         c == '/';
}

// `text` is 1 to `max_bytes` key characters, the first a lower-case letter (or, when
// `digit_first`, a digit).
bool IsKeyPart(absl::string_view text, size_t max_bytes, bool digit_first) {
  if (text.empty() || text.size() > max_bytes) {
    return false;
  }
  const char first = text.front();
  if (!((first >= 'a' && first <= 'z') || (digit_first && first >= '0' && first <= '9'))) {
    return false;
  }
  for (char c : text) {
    if (!IsKeyChar(c)) {
      return false;
    }
  }
  return true;
}

// A simple key (up to 256 characters) or a multi-tenant one, tenant "@" system (up to 241 and
// 14 characters).
bool IsTraceStateKey(absl::string_view key) {
  const size_t at = key.find('@');
  if (at == absl::string_view::npos) {
    return IsKeyPart(key, 256, /*digit_first=*/false);
  }
  return IsKeyPart(key.substr(0, at), 241, /*digit_first=*/true) &&
         IsKeyPart(key.substr(at + 1), 14, /*digit_first=*/false);
}

// 1 to 256 printable ASCII characters other than ',' and '=', not ending in a space.
bool IsTraceStateValue(absl::string_view value) {
  if (value.empty() || value.size() > kMaxTraceStateValueBytes || value.back() == ' ') {
    return false;
  }
  for (char c : value) {
    if (c < 0x20 || c > 0x7E || c == ',' || c == '=') {
      return false;
    }
  }
  return true;
}

// A trimmed tracestate header: at most 512 bytes and 32 members with distinct keys; empty
// members (",,") are allowed and not counted.
bool IsValidTraceState(absl::string_view state) {
  if (state.size() > kMaxTraceStateBytes) {
    return false;
  }
  std::array<absl::string_view, kMaxTraceStateMembers> keys;
  size_t members = 0;
  for (absl::string_view member : absl::StrSplit(state, ',')) {
    member = TrimOws(member);
    if (member.empty()) {
      continue;
    }
    if (members == kMaxTraceStateMembers) {
      return false;
    }
    const size_t equals = member.find('=');
    if (equals == absl::string_view::npos) {
      return false;
    }
    const absl::string_view key = member.substr(0, equals);
    if (!IsTraceStateKey(key) || !IsTraceStateValue(member.substr(equals + 1))) {
      return false;
    }
    for (size_t i = 0; i < members; ++i) {
      if (keys[i] == key) {
        return false;
      }
    }
    keys[members++] = key;
  }
  return true;
}

// {traceid}-{spanid}[-{sampling}[-{parentspanid}]]. A lone sampling state names no trace: nullopt.
std::optional<TraceContext> ParseB3Single(absl::string_view value) {
  std::array<absl::string_view, 4> fields;
  size_t count = 0;
  for (absl::string_view field : absl::StrSplit(TrimOws(value), '-')) {
    if (count == fields.size()) {
      return std::nullopt;
    }
    fields[count++] = field;
  }
  if (count < 2) {
    return std::nullopt;
  }
  TraceContext context;
  if (!DecodeB3TraceId(fields[0], context.trace_id) || !DecodeSpanId(fields[1], context.span_id)) {
    return std::nullopt;
  }
  if (count == 2) {
    context.sampling_deferred = true;
  } else if (fields[2] == "1" || fields[2] == "d") {
    context.sampled = true;
  } else if (fields[2] != "0") {
    return std::nullopt;
  }
  // The caller's parent is not ours to record, but a malformed one makes the header malformed.
  if (count == 4 && (fields[3].size() != 16 || !IsLowerHex(fields[3]))) {
    return std::nullopt;
  }
  return context;
}

std::optional<TraceContext> ParseB3Multi(HeaderLookup headers) {
  const std::optional<absl::string_view> trace_id = headers("x-b3-traceid");
  const std::optional<absl::string_view> span_id = headers("x-b3-spanid");
  if (!trace_id.has_value() || !span_id.has_value()) {
    return std::nullopt;
  }
  TraceContext context;
  if (!DecodeB3TraceId(TrimOws(*trace_id), context.trace_id) ||
      !DecodeSpanId(TrimOws(*span_id), context.span_id)) {
    return std::nullopt;
  }
  context.sampling_deferred = true;
  // An unknown x-b3-sampled value is ignored as if absent: the ids still stand.
  if (const std::optional<absl::string_view> sampled = headers("x-b3-sampled")) {
    const absl::string_view state = TrimOws(*sampled);
    if (state == "1" || state == "true") {
      context.sampled = true;
      context.sampling_deferred = false;
    } else if (state == "0" || state == "false") {
      context.sampling_deferred = false;
    }
  }
  // Debug implies sampled, whatever x-b3-sampled says.
  if (const std::optional<absl::string_view> flags = headers("x-b3-flags")) {
    if (TrimOws(*flags) == "1") {
      context.sampled = true;
      context.sampling_deferred = false;
    }
  }
  return context;
}

}  // namespace

std::optional<TraceContext> ExtractTraceContext(HeaderLookup headers) {
  if (const std::optional<absl::string_view> traceparent = headers("traceparent")) {
    if (std::optional<TraceContext> context = ParseTraceparent(*traceparent)) {
      if (const std::optional<absl::string_view> tracestate = headers("tracestate")) {
        const absl::string_view state = TrimOws(*tracestate);
        if (IsValidTraceState(state)) {
          context->trace_state = std::string(state);
        }
      }
      return context;
    }
  }
  if (const std::optional<absl::string_view> b3 = headers("b3")) {
    if (std::optional<TraceContext> context = ParseB3Single(*b3)) {
      return context;
    }
  }
  return ParseB3Multi(headers);
}

}  // namespace sluice
