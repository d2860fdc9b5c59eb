#include "server/service/over_limit_cache.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"
#include "tests/support/heap_in_use.h"

namespace sluice {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// The limit the checks below were denied under.
constexpr uint64_t kLimit = 10;

// A storage key as the service builds one for a descriptor value of `value_bytes`.
std::string BigKey(int i, size_t value_bytes) {
  std::string key = absl::StrCat("ratelimit_{edge|user_id=", i, "-");
  key.resize(key.size() + value_bytes, 'v');
  return key + "}tb:1";
}

class OverLimitCacheTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  OverLimitCache cache_{clock_, 64};
};

// Verifies a denial answers only checks under the limit it was made at
// (envoyproxy/ratelimit#1077): a key denied at a request's override of 2 a minute is asked again
// under 100 a minute and must go to the backend; the newest claim replaces one of another limit.
TEST_F(OverLimitCacheTest, Issue1077DenialHoldsOnlyUnderItsOwnLimit) {
  cache_.Remember("k", 1, 2, 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 1, 2), 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 1, 100), 0);
  EXPECT_EQ(cache_.DeniedFor("k", 1, 1), 0);
  cache_.Remember("k", 5, 100, 400);  // more hits than the entry for 2: still replaces it
  EXPECT_EQ(cache_.DeniedFor("k", 5, 100), 400);
  EXPECT_EQ(cache_.DeniedFor("k", 1, 2), 0);
}

// Verifies a denial is remembered until its retry time, for requests of at least its hits.
TEST_F(OverLimitCacheTest, DeniesUntilRetryForAtLeastTheHits) {
  cache_.Remember("k", 3, kLimit, 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 3, kLimit), 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 5, kLimit), 1000);
  EXPECT_EQ(cache_.DeniedFor("k", 2, kLimit), 0);  // fewer hits may fit sooner: ask the backend
  EXPECT_EQ(cache_.DeniedFor("other", 3, kLimit), 0);
  clock_.AdvanceMicros(999);
  EXPECT_EQ(cache_.DeniedFor("k", 3, kLimit), 1);
  clock_.AdvanceMicros(1);
  EXPECT_EQ(cache_.DeniedFor("k", 3, kLimit), 0);
  EXPECT_EQ(cache_.hits(), 3u);
}

// Verifies a later denial for fewer hits replaces the entry, and Clear forgets everything.
TEST_F(OverLimitCacheTest, KeepsTheStrongerClaimAndClears) {
  cache_.Remember("k", 3, kLimit, 1000);
  cache_.Remember("k", 1, kLimit, 500);
  EXPECT_EQ(cache_.DeniedFor("k", 1, kLimit), 500);
  cache_.Remember("k", 4, kLimit, 5000);  // covers fewer requests: the entry for 1 hit stays
  EXPECT_EQ(cache_.DeniedFor("k", 1, kLimit), 500);
  cache_.Clear();
  EXPECT_EQ(cache_.DeniedFor("k", 1, kLimit), 0);
  cache_.Remember("k", 1, kLimit, 0);  // nothing to remember
  EXPECT_EQ(cache_.size(), 0u);
}

// Verifies the cache never holds more than its capacity.
TEST_F(OverLimitCacheTest, IsBounded) {
  for (int i = 0; i < 10000; ++i) {
    cache_.Remember(absl::StrCat("key", i), 1, kLimit, 1000000);
  }
  EXPECT_LE(cache_.size(), 64u);
}

// Verifies many keys with 1 KiB values never take more than max_bytes, the newest are still
// remembered, and live entries are evicted to make room.
TEST_F(OverLimitCacheTest, IsBoundedInBytes) {
  OverLimitCache cache(clock_, 1000000, kMiB);
  for (int i = 0; i < 20000; ++i) {
    cache.Remember(BigKey(i, 1024), 1, kLimit, 1'000'000);
    if (i % 500 == 499) {
      ASSERT_LE(cache.BytesUsed(), kMiB) << "after " << i + 1 << " keys";
    }
  }
  // About 1.1 KB a key: several hundred fit, the rest were evicted.
  EXPECT_GT(cache.size(), 500u);
  EXPECT_LT(cache.size(), 1000u);
  EXPECT_EQ(cache.EvictionCount(), 20000u - cache.size());
  EXPECT_EQ(cache.DeniedFor(BigKey(19999, 1024), 1, kLimit), 1'000'000);
}

// Verifies expired entries make room before any live one is evicted.
TEST_F(OverLimitCacheTest, DropsExpiredEntriesBeforeLiveOnes) {
  OverLimitCache cache(clock_, 1000000, kMiB);
  for (int i = 0; i < 5000; ++i) {
    cache.Remember(BigKey(i, 1024), 1, kLimit, 1000);
  }
  const uint64_t evicted = cache.EvictionCount();
  clock_.AdvanceMicros(1000);
  // About 3 new keys a shard, where about 28 fit: room only if the expired entries make it.
  for (int i = 0; i < 100; ++i) {
    cache.Remember(BigKey(100000 + i, 1024), 1, kLimit, 1000);
  }
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(cache.DeniedFor(BigKey(100000 + i, 1024), 1, kLimit), 1000) << i;
  }
  EXPECT_EQ(cache.EvictionCount(), evicted);
  EXPECT_LE(cache.BytesUsed(), kMiB);
}

// Verifies a key too large for a shard's share is not remembered, and evicts nothing.
TEST_F(OverLimitCacheTest, KeyTooLargeForAShardIsNotRemembered) {
  OverLimitCache cache(clock_, 1000, kMiB);
  cache.Remember("small", 1, kLimit, 1000);
  const std::string huge(64 * 1024, 'k');  // a shard's share of 1 MiB is 32 KiB
  cache.Remember(huge, 1, kLimit, 1000);
  EXPECT_EQ(cache.DeniedFor(huge, 1, kLimit), 0);
  EXPECT_EQ(cache.DeniedFor("small", 1, kLimit), 1000);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.EvictionCount(), 0u);
}

// Verifies the account against what glibc reports, filled and after Clear.
TEST_F(OverLimitCacheTest, BytesUsedMatchesTheAllocator) {
  if (!HeapInUse().has_value()) {
    GTEST_SKIP() << "malloc is not glibc's (sanitizer build): nothing to compare with";
  }
  const int64_t before = *HeapInUse();
  auto cache = std::make_unique<OverLimitCache>(clock_, 1000000, 64 * kMiB);
  auto expect_close = [&](const char* when) {
    const double real = static_cast<double>(*HeapInUse() - before);
    const double counted = static_cast<double>(cache->BytesUsed());
    EXPECT_NEAR(counted, real, std::max(real * 0.05, 4096.0)) << when;
    EXPECT_GE(counted, real - std::max(real * 0.01, 4096.0)) << when;
  };
  for (int i = 0; i < 20000; ++i) {
    cache->Remember(BigKey(i, i % 5 == 0 ? 3 : 50 + i % 1500), 1, kLimit, 1'000'000);
  }
  expect_close("filled");
  cache->Clear();
  expect_close("cleared");
}

// Verifies /metrics gets the keys, bytes, bound and evictions.
TEST_F(OverLimitCacheTest, AppendsItsMetrics) {
  OverLimitCache cache(clock_, 64, 2 * kMiB);
  for (int i = 0; i < 100; ++i) {
    cache.Remember(absl::StrCat("k", i), 1, kLimit, 1000);
  }
  std::string text;
  cache.AppendMetrics(&text);
  EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat("sluice_over_limit_cache_keys ",
                                                      cache.size(), "\n")));
  EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat("sluice_over_limit_cache_bytes ",
                                                      cache.BytesUsed(), "\n")));
  EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat("sluice_over_limit_cache_max_bytes ",
                                                      2 * kMiB, "\n")));
  EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat(
                        "sluice_over_limit_cache_evictions_total ", cache.EvictionCount(), "\n")));
  EXPECT_GE(cache.EvictionCount(), 100u - 64u);
}

// Verifies Peek shows a live entry (its wait, fewest hits and limit) without counting a hit,
// and nothing once it expired or was forgotten.
TEST_F(OverLimitCacheTest, PeekShowsALiveEntryWithoutCountingIt) {
  EXPECT_FALSE(cache_.Peek("k").has_value());
  cache_.Remember("k", 3, kLimit, 1000);
  clock_.AdvanceMicros(400);
  auto peeked = cache_.Peek("k");
  ASSERT_TRUE(peeked.has_value());
  EXPECT_EQ(peeked->denied_for_us, 600);
  EXPECT_EQ(peeked->min_hits, 3u);
  EXPECT_EQ(peeked->limit, kLimit);
  EXPECT_EQ(cache_.hits(), 0u);
  clock_.AdvanceMicros(600);
  EXPECT_FALSE(cache_.Peek("k").has_value());
  cache_.Remember("j", 1, kLimit, 1000);
  cache_.Forget("j");
  EXPECT_FALSE(cache_.Peek("j").has_value());
}

}  // namespace
}  // namespace sluice
