#include "server/service/over_limit_cache.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

class OverLimitCacheTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  OverLimitCache cache_{clock_, 64};
};

// Verifies a denial is remembered until its retry time, for requests of at least its hits.
TEST_F(OverLimitCacheTest, DeniesUntilRetryForAtLeastTheHits) {
  cache_.Remember("k", 3, 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 3), 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 5), 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 2), 0);  // fewer hits may fit sooner: ask the backend
  EXPECT_EQ(cache_.DeniedFor("other", 3), 0);
  clock_.AdvanceMicros(999);
  EXPECT_EQ(cache_.DeniedFor("k", 3), 1);
  clock_.AdvanceMicros(1);
  EXPECT_EQ(cache_.DeniedFor("k", 3), 0);
  EXPECT_EQ(cache_.hits(), 3u);
}

// Verifies a later denial for fewer hits replaces the entry, and Clear forgets everything.
TEST_F(OverLimitCacheTest, KeepsTheStrongerClaimAndClears) {
  cache_.Remember("k", 3, 1000);
  cache_.Remember("k", 1, 500);
  EXPECT_EQ(cache_.DeniedFor("k", 1), 500);
  cache_.Remember("k", 4, 5000);  // covers fewer requests: the entry for 1 hit stays
  EXPECT_EQ(cache_.DeniedFor("k", 1), 500);
  cache_.Clear();
  EXPECT_EQ(cache_.DeniedFor("k", 1), 0);
  cache_.Remember("k", 1, 0);  // nothing to remember
  EXPECT_EQ(cache_.size(), 0u);
}

// Verifies the cache never holds more than its capacity.
TEST_F(OverLimitCacheTest, IsBounded) {
  for (int i = 0; i < 10000; ++i) {
    cache_.Remember(absl::StrCat("key", i), 1, 1000000);
  }
  EXPECT_LE(cache_.size(), 64u);
}

}  // namespace
}  // namespace sluice
