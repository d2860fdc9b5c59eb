// Builds the storage key of one rule applied to one request descriptor:
//
//   <prefix>{<domain>|<key>=<value>|<key>=<value>...}<rule suffix>
//
// The braces are a Redis Cluster hash tag: by default every key of one resolved descriptor
// (all of its rules) lands in one slot, and different descriptors spread over all slots.
// Domain, keys and values are percent-escaped ('%', '{', '}', '|', '=' and bytes below 0x21 or
// above 0x7e become %XX), so no value can close the tag or forge a separator, and two different
// descriptors never share a key. Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/config/config.h"

namespace sluice {

// Appends the escaped form of `text` to `out`.
void AppendEscapedKeyPart(absl::string_view text, std::string* out);

// The full storage key; see the file comment. `rule_suffix` is RateLimitRule::key_suffix (or
// an override's equivalent) and is appended verbatim.
std::string StorageKey(absl::string_view prefix, absl::string_view domain,
                       absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix);

}  // namespace sluice
