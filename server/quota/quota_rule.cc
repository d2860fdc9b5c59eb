#include "server/quota/quota_rule.h"

#include <utility>
#include <vector>

#include "server/quota/bucket_key.h"
#include "server/quota/bucket_match.h"

namespace sluice::quota {

QuotaRule MatchQuotaRule(const Config* config, absl::string_view domain,
                         absl::string_view bucket_key) {
  QuotaRule rule;  // no config, domain or rule: allow all
  const Domain* configured = config != nullptr ? config->FindDomain(domain) : nullptr;
  if (configured == nullptr) {
    return rule;
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [k, v] : BucketPairs(bucket_key)) {
    pairs.emplace_back(std::string(k), std::string(v));
  }
  const BucketMatch match = MatchBucket(*configured, pairs);
  if (match.node == nullptr) {
    return rule;
  }
  rule.stat_key = match.node->full_key;
  bool limited = false;
  for (const RateLimitRule& r : match.node->rules) {
    if (r.unlimited) {
      continue;
    }
    const double rate =
        static_cast<double>(r.params.limit) * 1e6 / static_cast<double>(r.params.period_us);
    if (!limited || rate < rule.rate) {
      rule.rate = rate;
      rule.burst = static_cast<double>(Capacity(r.params));
    }
    limited = true;
  }
  if (limited) {
    rule.kind = rule.rate > 0 ? QuotaRule::Kind::kShare : QuotaRule::Kind::kDenyAll;
  }
  if (match.node->shadow_mode) {
    rule.shadow = true;
    rule.kind = QuotaRule::Kind::kAllowAll;
  }
  return rule;
}

}  // namespace sluice::quota
