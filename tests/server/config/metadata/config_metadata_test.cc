// The config loader's `metadata` key, which builds a google.protobuf.Struct, and the loader's
// alias counting on an example that loads metadata. Apart from
// config_loader_test because it runs protobuf maps, which cannot run under TSan with Debian's
// uninstrumented libprotobuf (tests/CMakeLists.txt, label "grpc").
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
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

// 22 YAML nodes once the two aliases are expanded (3 nodes each), 38 bytes of scalars.
constexpr absl::string_view kSmallAliases = R"(domain: a
descriptors:
  - key: k
    metadata:
      x: &x [1, 2]
      y: [*x, *x]
)";

// Verifies nodes are counted exactly, an alias as its anchor's whole content each time it is
// used: a config of 22 nodes loads with a budget of 22 and is refused with 21, at the alias.
TEST(ConfigMetadataTest, CountsEveryUseOfAnAlias) {
  ConfigLoadOptions options;
  options.max_nodes = 22;
  EXPECT_TRUE(LoadConfigSources({{"a.yaml", std::string(kSmallAliases)}}, options).ok());
  options.max_nodes = 21;
  absl::StatusOr<std::unique_ptr<Config>> config =
      LoadConfigSources({{"a.yaml", std::string(kSmallAliases)}}, options);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "a.yaml:6: descriptors[0].metadata.y[1]: the configuration grows past 21 YAML nodes "
            "(--config_max_nodes), counted over all files with every alias expanded each time "
            "it is used; this alias repeats the anchor at line 5 (3 nodes, 2 bytes)");
}

// Verifies metadata holding an alias of a node it is inside (a node that contains itself) is
// refused at that alias, before the walk expands it level after level: the input is the one
// config_fuzz timed out on (three thousand scalars repeated at each of 256 levels).
TEST(ConfigMetadataTest, RefusesMetadataThatContainsItself) {
  constexpr absl::string_view kText =
      "domain: bomb\ndescriptors:\n  - key: k\n    metadata:\n"
      "      x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
      "      x1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n"
      "      x2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\n"
      "      x3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]\n"
      "      x4: &a4 [*a3, *a3, *a3, 4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]\n";
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigSources({{"a.yaml", std::string(kText)}}, {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "a.yaml:9: descriptors[0].metadata.x4[4]: contains itself (an alias of a node it is "
            "inside)");
}

// Verifies scalar bytes are counted the same way, against their own budget.
TEST(ConfigMetadataTest, CountsScalarBytesOfEveryUseOfAnAlias) {
  ConfigLoadOptions options;
  options.max_scalar_bytes = 38;
  EXPECT_TRUE(LoadConfigSources({{"a.yaml", std::string(kSmallAliases)}}, options).ok());
  options.max_scalar_bytes = 37;
  absl::StatusOr<std::unique_ptr<Config>> config =
      LoadConfigSources({{"a.yaml", std::string(kSmallAliases)}}, options);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              ::testing::StartsWith("a.yaml:6: descriptors[0].metadata.y[1]: the configuration "
                                    "grows past 37 bytes of YAML scalars "
                                    "(--config_max_scalar_bytes)"));
}

// Verifies the budget is one for the whole config: two files that each fit, but not together,
// are refused in the second.
TEST(ConfigMetadataTest, BudgetSpansAllFiles) {
  ConfigLoadOptions options;
  options.max_nodes = 30;
  EXPECT_TRUE(LoadConfigSources({{"a.yaml", std::string(kSmallAliases)}}, options).ok());
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigSources(
      {{"a.yaml", std::string(kSmallAliases)}, {"b.yaml", "domain: b\ndescriptors:\n"
                                                           "  - key: k\n    value: v\n"}},
      options);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              ::testing::StartsWith("b.yaml:4: descriptors[0]: the configuration grows past 30 "
                                    "YAML nodes"));
}

}  // namespace
}  // namespace sluice
