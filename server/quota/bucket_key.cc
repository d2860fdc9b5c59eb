#include "server/quota/bucket_key.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::quota {
namespace {

// Reads "<len>:<bytes>" at the front of `rest` and advances past it.
absl::string_view TakeField(absl::string_view& rest) {
  const size_t colon = rest.find(':');
  size_t length = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(rest.substr(0, colon), &length) || length > rest.size() - colon - 1) {
    rest = {};  // not a canonical key: nothing more is read
    return {};
  }
  const absl::string_view field = rest.substr(colon + 1, length);
  rest.remove_prefix(colon + 1 + length);
  return field;
}

// Characters of `n` in decimal.
size_t DecimalDigits(size_t n) {
  size_t digits = 1;
  for (; n >= 10; n /= 10) {
    ++digits;
  }
  return digits;
}

}  // namespace

std::string BucketKey(const BucketId& bucket) {
  std::vector<std::pair<absl::string_view, absl::string_view>> pairs(bucket.bucket().begin(),
                                                                     bucket.bucket().end());
  std::sort(pairs.begin(), pairs.end());
  // The exact length, so that the key is allocated once and holds no spare capacity.
  size_t size = 0;
  for (const auto& [k, v] : pairs) {
    size += DecimalDigits(k.size()) + 1 + k.size() + DecimalDigits(v.size()) + 1 + v.size();
  }
  std::string key;
  key.reserve(size);
  for (const auto& [k, v] : pairs) {
    absl::StrAppend(&key, k.size(), ":", k, v.size(), ":", v);
  }
  return key;
}

std::vector<std::pair<absl::string_view, absl::string_view>> BucketPairs(absl::string_view key) {
  std::vector<std::pair<absl::string_view, absl::string_view>> pairs;
  absl::string_view rest = key;
  while (!rest.empty()) {
    const absl::string_view k = TakeField(rest);
    const absl::string_view v = TakeField(rest);
    pairs.emplace_back(k, v);
  }
  return pairs;
}

void FillBucketId(absl::string_view key, BucketId* out) {
  auto& map = *out->mutable_bucket();
  for (const auto& [k, v] : BucketPairs(key)) {
    map[std::string(k)] = std::string(v);
  }
}

}  // namespace sluice::quota
