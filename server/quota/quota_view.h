// What a quota server shows people and Prometheus: a snapshot taken at each rebalance (so that
// neither GET /rlqs nor a scrape walks the buckets under the server's lock), and the two texts
// made from it outside any lock.
//
// The page never shows what a client wrote as it is: every byte outside printable ASCII (and
// the backslash) is written \xNN, so no value can forge a line; a domain, key or value is cut at
// kShownBytes; and descriptor values (an API key, a user id) are shown only when the operator
// asks (--rlqs_page_values), otherwise as their length and a salted hash (the same value gives
// the same hash within one process, to tell buckets apart). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/strings/string_view.h"
#include "server/quota/quota_rule.h"

namespace sluice::quota {

struct QuotaView {
  // Totals when the snapshot was taken.
  size_t streams = 0;
  size_t buckets = 0;
  size_t subscriptions = 0;
  size_t bytes = 0;  // RLQS state held, as budgeted
  size_t stale = 0;  // buckets answered by the failure mode (their exchange failed)

  // The most demanded buckets, most demanded first.
  struct Line {
    std::string domain;
    std::string bucket;  // BucketKey
    QuotaRule::Kind kind = QuotaRule::Kind::kAllowAll;
    bool shadow = false;
    bool stale = false;
    double rate = 0;
    double demand = 0;           // every Envoy's, here and elsewhere
    std::vector<double> demands;  // this replica's Envoys'
    std::vector<double> sent;     // the shares they were last sent
    std::vector<double> remote;   // the other replicas' Envoys'
  };
  std::vector<Line> lines;
  size_t not_shown = 0;  // buckets past the lines

  // Per rule (stat key): this replica's Envoys' demand, the shares sent them (a shadow-mode
  // rule's: what enforcing it would send), and the demand above the shares.
  struct RuleGauges {
    double demand = 0;
    double share = 0;
    double over = 0;
  };
  absl::btree_map<std::string, RuleGauges> per_rule;
};

// The longest domain, key or value the page shows (longer ones are cut, marked "...").
inline constexpr size_t kShownBytes = 64;

// `text` as the page shows it: \xNN for bytes outside printable ASCII and for '\', cut at
// kShownBytes.
std::string PageText(absl::string_view text);

// GET /rlqs: a summary line, then one line per bucket of `view`, e.g.
//   "edge route=api tenant=<redacted 2 bytes #4f1a09c2>: 100.0/s; here 2 (demand 20.0, 300.0;
//    sent 20.0, 80.0); other replicas 1 (150.0)"
std::string DescribeQuotaView(const QuotaView& view, bool show_values);

// The per-rule gauges (sluice_rlqs_rule_demand, _share, _over_share) in the Prometheus text
// format.
void AppendRuleGauges(const QuotaView& view, std::string* out);

}  // namespace sluice::quota
