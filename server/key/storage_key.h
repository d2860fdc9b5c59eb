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
// A fixed window decided without a script keeps one key per window: the storage key followed
// by ":w<window index>" (AppendFixedWindowKey).
// This file is the one owner of the key format: config builds rule suffixes, the service
// storage keys and the Redis backend window keys with these functions, and nothing else
// spells a key. The hash tag between the braces follows Redis Cluster's rule, which is
// HashTagOf (server/redis/cluster/hash_slot.h).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"

namespace sluice {

// A request descriptor entry, as seen by matching and by key building (no dependency on the
// protos).
struct DescriptorEntryView {
  absl::string_view key;
  absl::string_view value;
  // Storage keys only: `value` is a share_threshold wildcard pattern standing for every value
  // it matches, written apart from any literal value (see the file comment).
  bool shared_pattern = false;
};

// The suffix that keeps one rule's state apart from the other rules of its descriptor and from
// other algorithms' state: "<algorithm code>:<period in seconds>", e.g. "tb:1", "fw:86400".
// Stable: it names stored state, so changing it orphans every counter.
std::string RuleKeySuffix(Algorithm algorithm, int64_t period_seconds);

// The suffix of a request's limit override (a fixed window of `limit` per `period_seconds`):
// "fw:<period>:l<limit>", so that overrides of different limits on one descriptor never share
// a counter, nor one with a configured rule. Stable, as RuleKeySuffix.
std::string OverrideKeySuffix(int64_t period_seconds, uint64_t limit);

// Appends the escaped form of `text` to `out`.
void AppendEscapedKeyPart(absl::string_view text, std::string* out);

// The full storage key; see the file comment. `rule_suffix` is RateLimitRule::key_suffix (or
// an override's equivalent) and is appended verbatim. `tag_key` is RateLimitRule::hash_tag:
// empty, or naming an entry absent from `entries`, gives the default layout.
std::string StorageKey(absl::string_view prefix, absl::string_view domain,
                       absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix,
                       absl::string_view tag_key = {});
// The same key appended to *out (several keys of one request share one buffer).
void AppendStorageKey(absl::string_view prefix, absl::string_view domain,
                      absl::Span<const DescriptorEntryView> entries, absl::string_view rule_suffix,
                      absl::string_view tag_key, std::string* out);
// An upper bound on what AppendStorageKey appends for keys and values without escapes, and a
// guess otherwise (for reserving).
size_t StorageKeySizeHint(absl::string_view prefix, absl::string_view domain,
                          absl::Span<const DescriptorEntryView> entries,
                          absl::string_view rule_suffix);

// Appends the key of the fixed window of `params` that holds `now_us` to *out: `base` followed
// by ":w" and the window's index, floor(now_us / period_us), or for calendar months ":m" and
// theirs (FixedWindowAt), so that the two never share a key. REQUIRES: params.period_us > 0.
void AppendFixedWindowKey(absl::string_view base, const LimitParams& params, int64_t now_us,
                          std::string* out);

}  // namespace sluice
