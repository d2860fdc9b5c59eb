#include "server/quota/bucket_match.h"

#include <algorithm>

namespace sluice::quota {

BucketMatch MatchBucket(const Domain& domain,
                        const std::vector<std::pair<std::string, std::string>>& pairs) {
  BucketMatch match;
  std::vector<const std::pair<std::string, std::string>*> left;
  left.reserve(pairs.size());
  for (const auto& pair : pairs) {
    left.push_back(&pair);
  }
  std::sort(left.begin(), left.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  const DescriptorNode* node = &domain.root;
  while (!left.empty()) {
    const DescriptorNode* next = nullptr;
    auto taken = left.end();
    for (auto it = left.begin(); it != left.end(); ++it) {
      MatchStep::How how;
      next = Config::FindChild(*node, DescriptorEntryView{(*it)->first, (*it)->second}, &how);
      if (next != nullptr) {
        taken = it;
        break;
      }
    }
    if (next == nullptr) {
      break;
    }
    match.path.push_back(DescriptorEntryView{(*taken)->first, (*taken)->second});
    left.erase(taken);
    node = next;
  }
  if (left.empty() && !match.path.empty() && !node->rules.empty()) {
    match.node = node;
  }
  return match;
}

}  // namespace sluice::quota
