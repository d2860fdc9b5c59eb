// A quota bucket's identity, kept once per bucket as one compact string. Envoy names a bucket by
// a BucketId, an unordered map of key/value pairs; its canonical key is the pairs sorted by key,
// each written "<len>:<key><len>:<value>", so that two ids with the same pairs have one key
// whatever the order Envoy serialized them in, and no bytes of a key or value can be mistaken
// for a separator. The id is rebuilt from the key when a response names the bucket. Pure;
// thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"

namespace sluice::quota {

using BucketId = envoy::service::rate_limit_quota::v3::BucketId;

// The canonical key of `bucket` (see above).
std::string BucketKey(const BucketId& bucket);

// The pairs of a canonical key, in key order (views into `key`).
// REQUIRES: `key` was made by BucketKey.
std::vector<std::pair<absl::string_view, absl::string_view>> BucketPairs(absl::string_view key);

// Fills `out` with the pairs of canonical key `key` (what BucketKey was made from).
// REQUIRES: `key` was made by BucketKey.
void FillBucketId(absl::string_view key, BucketId* out);

}  // namespace sluice::quota
