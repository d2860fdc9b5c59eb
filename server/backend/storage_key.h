// Builds the storage key of one rule applied to one request descriptor:
//
//   <prefix>{<domain>|<key>=<value>|<key>=<value>...}<rule suffix>              (default)
//   <prefix>{<domain>|<tag key>=<tag value>}|<key>=<value>...|<rule suffix>    (hash_tag set)
//
// The braces are a Redis Cluster hash tag. By default it covers the whole resolved descriptor:
// every rule of one descriptor lands in one slot, and different descriptors spread over all
// slots. A rule with `hash_tag: <entry key>` tags by that one entry instead, so the counters of
// several descriptors that carry the same entry (say user_id=42) share one slot and one request
// over them can be decided by one atomic script call. The whole descriptor always follows, so
// keys stay distinct.
// Domain, keys and values are percent-escaped ('%', '{', '}', '|', '=' and bytes below 0x21 or
// above 0x7e become %XX), so no value can close the tag or forge a separator, and two different
// descriptors never share a key (suffixes never contain '='). An entry whose value is a
// share_threshold pattern (DescriptorEntryView::shared_pattern) is written "<key>==<pattern>":
// every value the pattern matches shares that one key, and no literal value can produce it.
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/config/config.h"

namespace sluice {

// Appends the escaped form of `text` to `out`.
void AppendEscapedKeyPart(absl::string_view text, std::string* out);

// The full storage key; see the file comment. `rule_suffix` is RateLimitRule::key_suffix (or
// an override's equivalent) and is appended verbatim. `tag_key` is RateLimitRule::hash_tag:
// empty, or naming an entry absent from `entries`, gives the default layout.
std::string StorageKey(absl::string_view prefix, absl::string_view domain,
                       absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix,
                       absl::string_view tag_key = {});

// The hash tag of a key built by StorageKey: the text between the first '{' and the first '}'.
absl::string_view HashTagOf(absl::string_view key);

}  // namespace sluice
