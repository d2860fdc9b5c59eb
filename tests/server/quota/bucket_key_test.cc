#include "server/quota/bucket_key.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::quota {
namespace {

// Verifies the canonical key: the same pairs in any order give one key, any bytes round-trip
// (a colon, a NUL, digits), and the id rebuilt from the key has the pairs it was made from.
TEST(BucketKeyTest, CanonicalWhateverTheOrderAndRoundTrips) {
  BucketId a;
  (*a.mutable_bucket())["tenant"] = "t1";
  (*a.mutable_bucket())["route"] = std::string("a:1\0b", 5);
  (*a.mutable_bucket())["12"] = "3:4";
  BucketId b;
  (*b.mutable_bucket())["12"] = "3:4";
  (*b.mutable_bucket())["route"] = std::string("a:1\0b", 5);
  (*b.mutable_bucket())["tenant"] = "t1";
  const std::string key = BucketKey(a);
  EXPECT_EQ(key, BucketKey(b));
  const auto pairs = BucketPairs(key);
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].first, "12");
  EXPECT_EQ(pairs[1].second, std::string("a:1\0b", 5));
  BucketId rebuilt;
  FillBucketId(key, &rebuilt);
  EXPECT_EQ(rebuilt.bucket().size(), 3u);
  EXPECT_EQ(rebuilt.bucket().at("route"), std::string("a:1\0b", 5));
  EXPECT_EQ(BucketKey(rebuilt), key);
  // Pairs that would concatenate alike stay apart.
  BucketId c;
  (*c.mutable_bucket())["ab"] = "c";
  BucketId d;
  (*d.mutable_bucket())["a"] = "bc";
  EXPECT_NE(BucketKey(c), BucketKey(d));
}

}  // namespace
}  // namespace sluice::quota
