// The admin API's answers (admin_service.h) as plain data, and their JSON, the bodies of
// POST /admin/inspect and POST /admin/reset (docs/operations.md, "Resetting and inspecting
// counters", shows both). Integers are written exactly (times and durations in microseconds
// since the Unix epoch and microseconds), fractional state (tokens, water level, GCRA's arrival
// time) with 17 significant digits, every string escaped as JSON.
// Plain data and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"
#include "server/service/over_limit_cache.h"

namespace sluice {

// One rule a descriptor resolved to, and what the store and this replica hold for it.
struct RuleReport {
  std::string name;  // the rule's `name:`, if any
  LimitParams params;
  // The rule's unit ("minute") and multiplier as configured, or the request's override's.
  std::string unit;
  uint32_t unit_multiplier = 1;
  bool override_rule = false;  // the request's `limit`, not a configured rule
  std::string storage_key;
  // Inspect: the store's answer.
  StateReport state;
  // Inspect: this replica's over-limit cache entry for the storage key, when it has a cache
  // (`cache_on`) and an entry.
  bool cache_on = false;
  std::optional<OverLimitCache::Peeked> cached;
};

// One request descriptor and the rules it resolved to.
struct DescriptorReport {
  std::vector<std::pair<std::string, std::string>> entries;
  // The request's `limit` as "<requests>/<unit>", when it has one.
  std::string limit_override;
  // Matched a descriptor of the config (or carries a limit override).
  bool matched = false;
  bool unlimited = false;
  std::string stat_key;
  std::vector<RuleReport> rules;
};

struct InspectReport {
  std::string domain;
  std::string backend;  // Backend::Name()
  std::vector<DescriptorReport> descriptors;
};

struct ResetReport {
  std::string domain;
  std::string backend;
  std::vector<DescriptorReport> descriptors;  // rules without state
  // The store's keys that held state and were deleted.
  std::vector<std::string> deleted;
  // Over-limit cache entries this replica forgot.
  size_t forgotten_here = 0;
  // What the other replicas learn, and how fast (in words).
  std::string other_replicas;
  // OK, or what failed (the store's deletion, or telling the other replicas).
  std::string result = "ok";
};

// The JSON bodies, one object and a newline.
std::string InspectReportJson(const InspectReport& report);
std::string ResetReportJson(const ResetReport& report);

// The fields of `state` by name, as a JSON object: fixed_window {window_start_us, count},
// sliding_window_log {entries, total, oldest_us, newest_us, log: [[at_us, hits], ...] (the
// newest kMaxReportedLogEntries)}, sliding_window_counter {window_start_us, current, previous},
// token_bucket {fresh} or {tokens, last_refill_us}, leaky_bucket {level, last_leak_us}, gcra
// {tat_us}.
inline constexpr size_t kMaxReportedLogEntries = 100;
std::string StateJson(const AlgorithmState& state);

}  // namespace sluice
