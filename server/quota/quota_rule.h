// What the config says of one quota bucket: the rule its pairs match (bucket_match.h) reduced to
// what a quota server answers with. Pure; thread-safe.
//   - no domain, no rule, or an unlimited rule: ALLOW_ALL;
//   - a limit of 0: DENY_ALL;
//   - otherwise a global rate (limit / period, requests a second; a node with several rules takes
//     the slowest) and its capacity (the rule's burst), divided between the Envoys;
//   - a shadow-mode rule answers ALLOW_ALL but keeps its rate, so that the gauges can show the
//     shares enforcing it would give.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "server/config/config.h"

namespace sluice::quota {

struct QuotaRule {
  enum class Kind : uint8_t { kAllowAll = 0, kDenyAll = 1, kShare = 2 };

  Kind kind = Kind::kAllowAll;
  double rate = 0;   // requests per second (kShare, or a shadow-mode rule's)
  double burst = 0;  // the rule's capacity, requests
  // The matched node's stat key (its full_key), for the per-rule gauges; empty without a rule.
  std::string stat_key;
  bool shadow = false;

  // Whether the Envoys' demand for the bucket matters to anyone (the shares, or a shadow rule's
  // gauges): what other replicas must hear of.
  bool Divided() const { return rate > 0; }
  bool SameAnswer(const QuotaRule& other) const {
    return kind == other.kind && rate == other.rate && burst == other.burst;
  }
};

// The rule of the bucket with canonical key `bucket_key` (bucket_key.h) in `domain` of `config`
// (null: no config loaded yet, ALLOW_ALL).
QuotaRule MatchQuotaRule(const Config* config, absl::string_view domain,
                         absl::string_view bucket_key);

}  // namespace sluice::quota
