// The config loader's `metadata` key, which builds a google.protobuf.Struct. Apart from
// config_loader_test because it runs protobuf maps, which cannot run under TSan with Debian's
// uninstrumented libprotobuf (tests/CMakeLists.txt, label "grpc").
#include <memory>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"

namespace sluice {
namespace {

// Verifies metadata becomes a protobuf Struct with YAML's scalar types, and must be a map.
TEST(ConfigMetadataTest, ReadsMetadataAsStruct) {
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigText("test.yaml", R"(domain: up
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5}
    metadata:
      name: service_1
      quoted: "42"
      count: 42
      ratio: 0.5
      enabled: true
      nothing: ~
      tags: [a, 2]
      nested: {owner: {team: edge}}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const DescriptorNode* k = (*config)->domains().at("up")->root.default_children.at("k").get();
  ASSERT_NE(k, nullptr);
  ASSERT_NE(k->metadata, nullptr);
  const auto& fields = k->metadata->fields();
  EXPECT_EQ(fields.at("name").string_value(), "service_1");
  EXPECT_EQ(fields.at("quoted").string_value(), "42");
  EXPECT_EQ(fields.at("count").number_value(), 42);
  EXPECT_EQ(fields.at("ratio").number_value(), 0.5);
  EXPECT_TRUE(fields.at("enabled").bool_value());
  EXPECT_EQ(fields.at("nothing").kind_case(), google::protobuf::Value::kNullValue);
  ASSERT_EQ(fields.at("tags").list_value().values_size(), 2);
  EXPECT_EQ(fields.at("tags").list_value().values(0).string_value(), "a");
  EXPECT_EQ(fields.at("tags").list_value().values(1).number_value(), 2);
  EXPECT_EQ(fields.at("nested").struct_value().fields().at("owner").struct_value().fields().at(
                "team").string_value(),
            "edge");

  absl::StatusOr<std::unique_ptr<Config>> list =
      LoadConfigText("test.yaml", "domain: up\ndescriptors:\n  - key: k\n    metadata: [a]\n");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().message(),
            "test.yaml:4: descriptors[0].metadata: expected a map, got a list");
}

}  // namespace
}  // namespace sluice
