#include "server/trace/span.h"

#include <utility>

#include "absl/strings/escaping.h"

namespace sluice {
namespace {

template <size_t N>
std::string Hex(const std::array<uint8_t, N>& id) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(id.data()), id.size()));
}

}  // namespace

std::string ToHex(const TraceId& id) { return Hex(id); }
std::string ToHex(const SpanId& id) { return Hex(id); }

std::string Truncated(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return std::string(text);
  }
  constexpr absl::string_view kEllipsis = "...";
  if (max_bytes < kEllipsis.size()) {
    // No room for any text, nor for all of the ellipsis: the bound wins.
    return std::string(kEllipsis.substr(0, max_bytes));
  }
  size_t keep = max_bytes - kEllipsis.size();
  // Back off continuation bytes (10xxxxxx) so that no character is cut in two.
  while (keep > 0 && (static_cast<uint8_t>(text[keep]) & 0xC0) == 0x80) {
    --keep;
  }
  std::string out(text.substr(0, keep));
  out.append(kEllipsis.data(), kEllipsis.size());
  return out;
}

void SpanData::Add(absl::string_view key, absl::string_view value) {
  AddValue(key, Truncated(value, kMaxSpanValueBytes));
}
void SpanData::Add(absl::string_view key, int64_t value) { AddValue(key, value); }
void SpanData::Add(absl::string_view key, bool value) { AddValue(key, value); }
void SpanData::Add(absl::string_view key, double value) { AddValue(key, value); }

void SpanData::AddValue(absl::string_view key, SpanAttribute::Value value) {
  if (attributes.size() >= kMaxSpanAttributes) {
    ++dropped_attributes;
    return;
  }
  attributes.push_back({key, std::move(value)});
}

const SpanAttribute* SpanData::Find(absl::string_view key) const {
  for (const SpanAttribute& attribute : attributes) {
    if (attribute.key == key) {
      return &attribute;
    }
  }
  return nullptr;
}

void SpanData::SetError(absl::string_view message) {
  status = SpanStatus::kError;
  status_message = Truncated(message, kMaxSpanValueBytes);
}

}  // namespace sluice
