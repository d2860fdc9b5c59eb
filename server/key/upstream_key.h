// envoyproxy/ratelimit's cache key of a fixed window, made from Sluice's storage key: the key
// format of the stores where Sluice shares counters with upstream (memcached), so that replicas
// of both, during a migration, count one window in one counter.
//
//   <prefix><domain>_<key>_<value>_..._<window start in seconds>
//
// as upstream's limiter/cache_key.go (GenerateCacheKey) writes it: every entry's key and value
// (a share_threshold level's pattern in place of the value), each followed by '_', and the
// window's start, floor(now / period) * period, in seconds (with calendar months, 00:00 UTC on
// the 1st of the window's first month, as upstream's USE_CALENDAR_MONTH_RATE_LIMIT has it). Upstream has one rule per descriptor
// and only envoyproxy/ratelimit's units; a window upstream never keeps (a unit_multiplier above
// 1, or a rule beside others on its descriptor, LimitParams::shares_descriptor) gets
// "_<period>s" after it, so that two rules of one descriptor never meet in one key (upstream's
// keys always end in a digit). Like upstream's, the format does not tell keys and values apart:
// key "a_b" with value "c" and key "a" with value "b_c" share a key, as they do upstream.
//
// This file reads storage_key.h's format back (the one other place that knows it); pure
// functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "server/algorithm/algorithm.h"

namespace sluice {

// How a lone fixed window's counter is named on Redis (--redis_key_layout).
enum class KeyLayout : uint8_t {
  // "sluice": the storage key and the window's index (AppendFixedWindowKey), in the hash tag
  // of its descriptor.
  kSluice,
  // "upstream": envoyproxy/ratelimit's key (AppendUpstreamWindowKey), so that upstream's
  // replicas and Sluice's count one window in one counter. Keys without a hash tag.
  kUpstream,
};
// "sluice", "upstream".
absl::string_view KeyLayoutName(KeyLayout layout);
std::optional<KeyLayout> ParseKeyLayout(absl::string_view name);

// Appends the upstream key of the fixed window of `params` that holds `now_us` to *out, for the
// storage key `storage_key` made with `prefix` (StorageKey). False, with *out unchanged, when
// `storage_key` is not one StorageKey makes with that prefix.
// REQUIRES: params.period_us > 0.
bool AppendUpstreamWindowKey(absl::string_view storage_key, absl::string_view prefix,
                             const LimitParams& params, int64_t now_us, std::string* out);

// envoyproxy/ratelimit's TTL of a window key written at now_us, before its jitter: the unit's
// seconds (utils.UnitToDivider; Sluice's other periods, their seconds), or with calendar months
// the whole seconds left until the window ends, rounded up (USE_CALENDAR_MONTH_RATE_LIMIT).
// REQUIRES: params.period_us > 0.
int64_t UpstreamWindowTtlSeconds(const LimitParams& params, int64_t now_us);

// Whether envoyproxy/ratelimit's period for a unit: 1, 60, 3600, 86400, 604800, 2592000 or
// 31536000 seconds (utils.UnitToDivider).
bool IsUpstreamUnitPeriod(int64_t period_us);

}  // namespace sluice
