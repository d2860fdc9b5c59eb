#include "server/common/flag_file.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// Verifies a secret file (--admin_token_file) is read without the whitespace around it (echo's
// newline), and that a missing or blank file is refused naming the flag.
TEST(FlagFileTest, ReadsASecretTrimmed) {
  testing::TempDir dir;
  auto token = ReadSecretFile("admin_token_file", dir.WriteFile("token", "  s3cret\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret");
  auto blank = ReadSecretFile("admin_token_file", dir.WriteFile("blank", " \n\t\n"));
  ASSERT_FALSE(blank.ok());
  EXPECT_THAT(blank.status().message(), HasSubstr("--admin_token_file="));
  EXPECT_THAT(blank.status().message(), HasSubstr("holds no token"));
  auto missing = ReadSecretFile("admin_token_file", dir.path() + "/none");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--admin_token_file="));
}

}  // namespace
}  // namespace sluice
