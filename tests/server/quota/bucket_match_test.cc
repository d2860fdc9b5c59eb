#include "server/quota/bucket_match.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/config/config_loader.h"

namespace sluice::quota {
namespace {

constexpr char kConfig[] = R"(domain: q
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100}
    descriptors:
      - key: path
        value: "/api/*"
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: path
        rate_limit: {unit: second, requests_per_unit: 50}
  - key: tenant
    value: gold
    descriptors:
      - key: region
        rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: free
    rate_limit: {unlimited: true}
)";

class BucketMatchTest : public ::testing::Test {
 protected:
  BucketMatchTest() {
    auto config = LoadConfigText("q.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    config_ = std::move(*config);
    domain_ = config_->FindDomain("q");
  }

  // The rate of the rule the bucket matches, or -1 when none does; the path taken in *path.
  int64_t Limit(const std::vector<std::pair<std::string, std::string>>& pairs,
                std::string* path = nullptr) {
    const BucketMatch match = MatchBucket(*domain_, pairs);
    if (path != nullptr) {
      path->clear();
      for (const DescriptorEntryView& e : match.path) {
        *path += std::string(e.key) + "=" + std::string(e.value) + ";";
      }
    }
    if (match.node == nullptr) {
      return -1;
    }
    return match.node->rules.front().unlimited
               ? 0
               : static_cast<int64_t>(match.node->rules.front().requests_per_unit);
  }

  std::unique_ptr<Config> config_;
  const Domain* domain_ = nullptr;
};

// Verifies a bucket is walked down the tree as a descriptor would be, whatever the order of its
// pairs: the key that selects a child at each level is taken there (exact, wildcard, default).
TEST_F(BucketMatchTest, PairsAreTakenInTreeOrderWhateverTheirOrder) {
  std::string path;
  EXPECT_EQ(Limit({{"tenant", "t1"}}, &path), 100);
  EXPECT_EQ(path, "tenant=t1;");
  EXPECT_EQ(Limit({{"path", "/api/orders"}, {"tenant", "t1"}}, &path), 10);
  EXPECT_EQ(path, "tenant=t1;path=/api/orders;");
  EXPECT_EQ(Limit({{"tenant", "t1"}, {"path", "/web"}}), 50);
  EXPECT_EQ(Limit({{"region", "eu"}, {"tenant", "gold"}}, &path), 1000);
  EXPECT_EQ(path, "tenant=gold;region=eu;");
  EXPECT_EQ(Limit({{"free", "x"}}), 0);  // unlimited
}

// Verifies a key with '*' takes a bucket's pair as it takes a descriptor's entry (its
// "key_value" against the pattern, before the key's default), whichever order the pairs come in.
TEST_F(BucketMatchTest, KeyWildcardTakesAPair) {
  auto config = LoadConfigText("kw.yaml", R"(domain: kw
descriptors:
  - key: svc
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: "svc_*"
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 7}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const Domain& domain = *(*config)->FindDomain("kw");
  // The match's path views the pairs given: they must outlive it.
  const std::vector<std::pair<std::string, std::string>> first = {{"user", "u1"}, {"svc", "api"}};
  BucketMatch match = MatchBucket(domain, first);
  ASSERT_NE(match.node, nullptr);
  EXPECT_EQ(match.node->rules.front().requests_per_unit, 7u);
  ASSERT_EQ(match.path.size(), 2u);
  EXPECT_EQ(match.path[0].key, "svc");
  const std::vector<std::pair<std::string, std::string>> second = {{"svc_name", "api"},
                                                                    {"user", "u1"}};
  match = MatchBucket(domain, second);
  ASSERT_NE(match.node, nullptr);
  EXPECT_EQ(match.node->rules.front().requests_per_unit, 7u);
  EXPECT_EQ(MatchBucket(domain, {{"svc", "api"}}).node, nullptr);  // the wildcard has no rule
}

// Verifies the buckets that match no rule: a pair left over (no child takes it), a node without
// rules, an unknown key.
TEST_F(BucketMatchTest, BucketsWithoutARule) {
  std::string path;
  EXPECT_EQ(Limit({{"tenant", "t1"}, {"color", "red"}}, &path), -1);
  EXPECT_EQ(path, "tenant=t1;");
  EXPECT_EQ(Limit({{"tenant", "gold"}}), -1);  // gold has no rule of its own
  EXPECT_EQ(Limit({{"color", "red"}}), -1);
  EXPECT_EQ(Limit({}), -1);
}

}  // namespace
}  // namespace sluice::quota
