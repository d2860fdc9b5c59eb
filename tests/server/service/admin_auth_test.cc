#include "server/service/admin_auth.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// Verifies a caller passes only with "Bearer <token>" for exactly the token: the scheme's case
// aside, nothing more, nothing less.
TEST(AdminAuthTest, BearerTokenMustMatchExactly) {
  EXPECT_TRUE(AdminAuthorized("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(AdminAuthorized("bearer s3cret", "s3cret"));
  EXPECT_TRUE(AdminAuthorized("  Bearer   s3cret ", "s3cret"));
  EXPECT_FALSE(AdminAuthorized(nullptr, "s3cret"));
  EXPECT_FALSE(AdminAuthorized("", "s3cret"));
  EXPECT_FALSE(AdminAuthorized("Bearer", "s3cret"));
  EXPECT_FALSE(AdminAuthorized("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(AdminAuthorized("Bearer s3cretX", "s3cret"));
  EXPECT_FALSE(AdminAuthorized("Bearer S3CRET", "s3cret"));
  EXPECT_FALSE(AdminAuthorized("Basic s3cret", "s3cret"));
  EXPECT_FALSE(AdminAuthorized("s3cret", "s3cret"));
}

// Verifies that without a token (loopback-only listeners) every caller passes, header or not.
TEST(AdminAuthTest, NoTokenAsksNothing) {
  EXPECT_TRUE(AdminAuthorized(nullptr, ""));
  EXPECT_TRUE(AdminAuthorized("Bearer anything", ""));
}

// Verifies the comparison's answer: equal strings only, whatever their lengths.
TEST(AdminAuthTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  // A prefix padded with what the loop reads past the shorter one is still different.
  EXPECT_FALSE(ConstantTimeEquals(std::string("ab\0", 3), "ab"));
}

}  // namespace
}  // namespace sluice
