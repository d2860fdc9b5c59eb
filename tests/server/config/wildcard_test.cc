#include "server/config/wildcard.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

class WildcardTest : public ::testing::Test {};

// Verifies a pattern without `*` matches only itself.
TEST_F(WildcardTest, PlainPatternMatchesOnlyItself) {
  EXPECT_TRUE(WildcardMatch("abc", "abc"));
  EXPECT_TRUE(WildcardMatch("", ""));
  EXPECT_FALSE(WildcardMatch("abc", "abcd"));
  EXPECT_FALSE(WildcardMatch("abc", "ab"));
  EXPECT_FALSE(WildcardMatch("abc", ""));
  EXPECT_FALSE(WildcardMatch("", "a"));
  EXPECT_FALSE(WildcardMatch("abc", "ABC"));
}

// Verifies a trailing `*` is a prefix match, as in envoyproxy/ratelimit, including the empty
// remainder.
TEST_F(WildcardTest, TrailingStarIsPrefixMatch) {
  EXPECT_TRUE(WildcardMatch("foo*", "foo"));
  EXPECT_TRUE(WildcardMatch("foo*", "foobar"));
  EXPECT_FALSE(WildcardMatch("foo*", "fo"));
  EXPECT_FALSE(WildcardMatch("foo*", "xfoo"));
}

// Verifies `*` at the start, in the middle, repeated, and alone.
TEST_F(WildcardTest, StarsAnywhere) {
  EXPECT_TRUE(WildcardMatch("*bar", "bar"));
  EXPECT_TRUE(WildcardMatch("*bar", "foobar"));
  EXPECT_FALSE(WildcardMatch("*bar", "barfoo"));
  EXPECT_TRUE(WildcardMatch("a*b*c", "abc"));
  EXPECT_TRUE(WildcardMatch("a*b*c", "a12b34c"));
  EXPECT_TRUE(WildcardMatch("a*b*c", "abcbc"));  // needs the last star to extend
  EXPECT_FALSE(WildcardMatch("a*b*c", "acb"));
  EXPECT_FALSE(WildcardMatch("a*b*c", "abcd"));
  EXPECT_TRUE(WildcardMatch("*", ""));
  EXPECT_TRUE(WildcardMatch("*", "anything"));
  EXPECT_TRUE(WildcardMatch("**", "x"));
  EXPECT_TRUE(WildcardMatch("a**b", "ab"));
  EXPECT_TRUE(WildcardMatch("*a*", "bab"));
  EXPECT_FALSE(WildcardMatch("*a*", "bbb"));
  EXPECT_TRUE(WildcardMatch("/api/*/users/*", "/api/v1/users/42"));
  EXPECT_FALSE(WildcardMatch("/api/*/users/*", "/api/v1/groups/42"));
}

// Verifies backtracking inside one pattern finds a match that a greedy scan would miss.
TEST_F(WildcardTest, BacktracksWithinPattern) {
  EXPECT_TRUE(WildcardMatch("*aab", "aaab"));
  EXPECT_TRUE(WildcardMatch("a*ab", "aaab"));
  EXPECT_FALSE(WildcardMatch("a*aab", "aab"));
  EXPECT_TRUE(WildcardMatch("*x*y*z", "xxyyzzxyz"));
}

// Verifies IsWildcardPattern spots any `*`.
TEST_F(WildcardTest, DetectsPatterns) {
  EXPECT_TRUE(IsWildcardPattern("*"));
  EXPECT_TRUE(IsWildcardPattern("a*b"));
  EXPECT_FALSE(IsWildcardPattern("ab"));
  EXPECT_FALSE(IsWildcardPattern(""));
}

}  // namespace
}  // namespace sluice
