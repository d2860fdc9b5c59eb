// The loaded rate-limit configuration: domains, their descriptor trees, and the rules on each
// node. A Config is immutable once built, so any number of threads may read one concurrently;
// reloads build a new Config and swap it in (see config_store.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "google/protobuf/struct.pb.h"
#include "server/algorithm/algorithm.h"
#include "server/config/failure_mode.h"
#include "server/config/node_memo.h"
#include "server/key/storage_key.h"

namespace sluice {

// Numbered as envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit.
enum class TimeUnit : int {
  kSecond = 1,
  kMinute = 2,
  kHour = 3,
  kDay = 4,
  kMonth = 5,
  kYear = 6,
  kWeek = 7,
};

// Seconds in one unit, as envoyproxy/ratelimit counts them: a month is 30 days, a year 365.
int64_t UnitSeconds(TimeUnit unit);
// "second", "minute", ... (lower case).
absl::string_view UnitName(TimeUnit unit);

// One limit on a descriptor node.
struct RateLimitRule {
  std::string name;  // optional; the target of other rules' `replaces`
  bool unlimited = false;
  uint32_t requests_per_unit = 0;
  TimeUnit unit = TimeUnit::kSecond;
  uint32_t unit_multiplier = 1;
  LimitParams params;  // derived: algorithm, limit, period = unit * multiplier, burst
  std::vector<std::string> replaces;
  // Co-location (Redis Cluster): when set, the key's hash tag is the domain plus this one entry
  // of the request's descriptor (e.g. "user_id"), instead of the whole descriptor, so that a
  // client's counters for several rules share one slot. Empty: the whole descriptor. A request
  // whose descriptor lacks the entry falls back to the whole descriptor.
  std::string hash_tag;
  // Storage-key suffix that keeps this rule's state apart from the node's other rules and from
  // an earlier rule of another algorithm or period on the same descriptor.
  std::string key_suffix;
  // failure_mode local: the fraction of the limit (and burst) one replica admits on its own
  // while the backend cannot decide, in (0, 1]. Unset: 1 / --replicas_hint.
  std::optional<double> local_share;
  // `charge:` whether a denied request's hits are charged (LimitParams::charge). Unset:
  // --default_charge decides (Resolve).
  std::optional<Charge> charge;
};

// One node of a domain's descriptor tree: a `key` (and `value`, if any) in the YAML.
struct DescriptorNode {
  std::string key;
  std::string value;  // empty: matches any value of `key` (the default)
  // The key holds a `*`. Such a node matches as envoyproxy/ratelimit matches every wildcard
  // (config_impl.go, GetLimit): its "key" or "key_value" (`composite_pattern`) against the
  // request entry's "key_value" text, so `key: user_*` matches every value of the key `user`,
  // and any key starting `user_`. A `*` only in the value matches that key's values alone
  // (wildcard.h), as an exact value matches that key alone.
  bool key_wildcard = false;
  std::string composite_pattern;  // "key" or "key_value"; set on key wildcards
  // Rules applied when a request's descriptor ends at this node; empty when the node has none.
  std::vector<RateLimitRule> rules;
  bool shadow_mode = false;
  bool detailed_metric = false;
  // envoyproxy/ratelimit's quota mode: an over-limit answer of this descriptor makes the
  // request OVER_LIMIT only when every quota-mode descriptor of the request is over its limit.
  bool quota_mode = false;
  // Metrics: the request's value, not the configured pattern or default, names this level in
  // the stat key (envoyproxy/ratelimit's value_to_metric).
  bool value_to_metric = false;
  // Every value matching this node's wildcard shares one counter (and one stat key, the
  // pattern) instead of one per value. Only on wildcard values; the validator checks it.
  bool share_threshold = false;
  // `metadata:` of the YAML, returned in the response's dynamic metadata for descriptors that
  // pass, when that is switched on. Null when the node has none.
  std::shared_ptr<const google::protobuf::Struct> metadata;
  // "domain.key_value.key2" in envoyproxy/ratelimit's stat-key form, for metrics.
  std::string full_key;
  // The metrics layer's counters of full_key, found once (RuleSeriesStore::CountNode).
  NodeMemo stat_memo;
  std::string file;  // where the node was declared
  int line = 0;

  // Children by exact "key_value" and by "key" alone (default); wildcards are tried in
  // declaration order after the exact map and before the default. The validator refuses two
  // exact or two wildcard children whose "key_value" strings coincide (key "a_b" value "c" and
  // key "a" value "b_c"; key "a" value "*" and key "a_*"), as envoyproxy/ratelimit does, and
  // Match checks the key of an exact hit.
  absl::flat_hash_map<std::string, std::unique_ptr<DescriptorNode>> exact_children;
  absl::flat_hash_map<std::string, std::unique_ptr<DescriptorNode>> default_children;
  std::vector<std::unique_ptr<DescriptorNode>> wildcard_children;  // key or value holds '*'
};

// The text envoyproxy/ratelimit names a level matched by the wildcard `node` with, in stat keys
// and in the counter key a share_threshold level shares (GetLimit: the pattern less the
// request key's "<key>_" prefix): a value wildcard's value; a key wildcard's composite_pattern
// without `entry_key` + "_" when it starts so, else the whole pattern. A view into `node`.
absl::string_view WildcardLevelText(const DescriptorNode& node, absl::string_view entry_key);

struct Domain {
  std::string name;
  std::string file;
  // `failure_mode:` of the YAML; unset: --failure_mode decides.
  std::optional<FailureMode> failure_mode;
  // Where failure_mode was set, "file:line" (listings, merge conflicts); empty when unset.
  std::string failure_mode_at;
  DescriptorNode root;  // key and value empty; children are the top-level descriptors
};

// How Match reached one level of the tree.
struct MatchStep {
  enum class How : uint8_t { kExact, kWildcard, kDefault };
  const DescriptorNode* node = nullptr;
  How how = How::kExact;
};
// Inline for the depths configs use, so that matching with steps does not allocate.
using MatchSteps = absl::InlinedVector<MatchStep, 8>;

class Config {
 public:
  Config() = default;
  Config(const Config&) = delete;
  Config& operator=(const Config&) = delete;

  // envoyproxy/ratelimit matching: walk the domain's tree one entry at a time, at each level
  // trying the exact key_value, then wildcards, then the key's default, without backtracking.
  // Returns the node the request's descriptor ends on if that node has rules and the depth
  // equals entries.size(); otherwise nullptr (no limit applies). Unknown domain or no entries:
  // nullptr. A returned node may hold an unlimited rule; the caller answers OK for it.
  // A `*` in a configured value or key matches any run of characters (see wildcard.h and
  // DescriptorNode::key_wildcard). Does not allocate unless a "key_value" is longer than 256
  // bytes. The result lives as long as *this.
  // When `steps` is not null, it receives one MatchStep per entry on success (cleared first;
  // contents unspecified when nullptr is returned).
  const DescriptorNode* Match(absl::string_view domain,
                              absl::Span<const DescriptorEntryView> entries,
                              MatchSteps* steps = nullptr) const;
  // The same, in a domain already found (FindDomain): a request's descriptors look it up once.
  static const DescriptorNode* Match(const Domain& domain,
                                     absl::Span<const DescriptorEntryView> entries,
                                     MatchSteps* steps = nullptr);

  // The child of `node` that `entry` selects, one level of Match: exact "key_value", then the
  // first wildcard in declaration order (a key wildcard matching "key_value", a value wildcard
  // the value of its key), then the key's default; nullptr when none. *how says which.
  static const DescriptorNode* FindChild(const DescriptorNode& node,
                                         const DescriptorEntryView& entry, MatchStep::How* how);

  // True if `domain` is configured.
  bool HasDomain(absl::string_view domain) const;
  // The configured `domain`, or nullptr. Lives as long as *this.
  const Domain* FindDomain(absl::string_view domain) const;

  // Human-readable listing of every rule, one per line, for /config and --check_config:
  // domains by name, nodes in declaration order, e.g.
  //   "api.client: requests_per_unit=10 unit=second algorithm=token_bucket burst=20
  //    key_suffix=tb:1 shadow_mode=false (limits/api.yaml:4)"
  // A domain with its own failure_mode starts with a line of its own:
  //   "api: failure_mode=local (limits/api.yaml:2)"
  // Built at the first call and kept (a large config's listing takes seconds; the server
  // builds it while loading, for sluice_config_info's version): call it only once the Config is
  // complete.
  const std::string& Dump() const;

  // Number of nodes that carry rules, over all domains.
  size_t RuleCount() const;

  absl::flat_hash_map<std::string, std::unique_ptr<Domain>>& mutable_domains() {
    return domains_;
  }
  const absl::flat_hash_map<std::string, std::unique_ptr<Domain>>& domains() const {
    return domains_;
  }

  // Things the validator accepted, as envoyproxy/ratelimit does, but that are probably not what
  // the author meant ("<file>:<line>: <field>: <what>"), e.g. a rate_limit without
  // requests_per_unit (a limit of 0). Printed by --check_config and logged at each load.
  const std::vector<std::string>& warnings() const { return warnings_; }
  std::vector<std::string>& mutable_warnings() { return warnings_; }

 private:
  std::string BuildDump() const;

  absl::flat_hash_map<std::string, std::unique_ptr<Domain>> domains_;
  std::vector<std::string> warnings_;
  mutable std::once_flag dump_once_;
  mutable std::string dump_;  // written once, under dump_once_
};

}  // namespace sluice
