#include "server/config/config_description.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// Verifies the one form of config messages, with and without a line and a path.
TEST(ConfigDescriptionTest, WritesLocations) {
  EXPECT_EQ(ConfigMessage("a.yaml", 3, "descriptors[0].key", "must not be empty"),
            "a.yaml:3: descriptors[0].key: must not be empty");
  EXPECT_EQ(ConfigMessage("a.yaml", 1, "", "file is empty"), "a.yaml:1: file is empty");
  EXPECT_EQ(ConfigMessage("rls/api", 0, "descriptors[2].rate_limit.unit", "invalid"),
            "rls/api: descriptors[2].rate_limit.unit: invalid");
  EXPECT_EQ(ConfigLocation("a.yaml", 7), "a.yaml:7");
  EXPECT_EQ(ConfigLocation("rls/api", 0), "rls/api");
  const absl::Status error = ConfigError("a.yaml", 2, "domain", "missing");
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error.message(), "a.yaml:2: domain: missing");
}

// Verifies field paths as messages write them.
TEST(ConfigDescriptionTest, WritesPaths) {
  EXPECT_EQ(FieldPath("", "domain"), "domain");
  EXPECT_EQ(FieldPath("descriptors[0]", "rate_limits"), "descriptors[0].rate_limits");
  EXPECT_EQ(ItemPath("descriptors[0].rate_limits", 1), "descriptors[0].rate_limits[1]");
}

// Verifies a default field is not given, unread and without a line.
TEST(ConfigDescriptionTest, FieldsStartNotGiven) {
  const Field<uint32_t> field;
  EXPECT_FALSE(field.given);
  EXPECT_EQ(field.value, 0u);
  EXPECT_EQ(field.line, 0);
  EXPECT_TRUE(field.read_error.ok());
  const DescriptorDescription descriptor;
  EXPECT_FALSE(descriptor.rate_limit.has_value());
  EXPECT_FALSE(descriptor.descriptors.given);
}

}  // namespace
}  // namespace sluice
