// RLQS buckets against the rate-limit config: a BucketId is an unordered map of key/value pairs
// where RLS sends an ordered descriptor, and it is matched against the domain's descriptor tree
// as RLS matches a descriptor. From the domain's root, each level takes the pair whose key
// selects a child there (exact value, then wildcards in declaration order, then the key's
// default: Config::FindChild), trying the pairs in key order and taking the first that selects
// one; the walk ends when no remaining pair selects a child. The bucket has a rule when every
// pair was taken and the node reached has rules, as a descriptor has one only when its last entry
// lands on a node with rules. Pure; thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/config/config.h"
#include "server/key/storage_key.h"

namespace sluice::quota {

struct BucketMatch {
  // The node the bucket ends on, when it has rules; null otherwise (no rule applies).
  const DescriptorNode* node = nullptr;
  // The pairs in the order the walk took them: the descriptor the bucket stands for (views into
  // the pairs given). Holds every pair when node is not null.
  std::vector<DescriptorEntryView> path;
};

// Matches the bucket `pairs` (in any order; keys distinct) in `domain`.
BucketMatch MatchBucket(const Domain& domain,
                        const std::vector<std::pair<std::string, std::string>>& pairs);

}  // namespace sluice::quota
