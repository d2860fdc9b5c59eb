#include "server/redis/script_cache.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis/sha1.h"

namespace sluice {
namespace {

// Verifies registration computes the SHA-1 and hands out dense ids.
TEST(ScriptCacheTest, RegistersWithSha) {
  ScriptCache cache;
  absl::StatusOr<const RedisScript*> a = cache.Register("a", "return 1");
  absl::StatusOr<const RedisScript*> b = cache.Register("b", "return 2");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->sha1(), Sha1Hex("return 1"));
  EXPECT_EQ((*a)->name(), "a");
  EXPECT_EQ((*a)->source(), "return 1");
  EXPECT_EQ((*a)->id(), 0);
  EXPECT_EQ((*b)->id(), 1);
  EXPECT_EQ(cache.Find("b"), *b);
  EXPECT_EQ(cache.Find("c"), nullptr);
  EXPECT_THAT(cache.All(), ::testing::ElementsAre(*a, *b));
}

// Verifies re-registering the same pair is a no-op and a conflicting source is refused.
TEST(ScriptCacheTest, RegistrationIsIdempotentAndRejectsConflicts) {
  ScriptCache cache;
  const RedisScript* first = *cache.Register("a", "return 1");
  EXPECT_EQ(*cache.Register("a", "return 1"), first);
  EXPECT_EQ(cache.Register("a", "return 2").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(cache.Register("", "return 2").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Register("b", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.All().size(), 1u);
}

}  // namespace
}  // namespace sluice
