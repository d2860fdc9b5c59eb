// `metadata` through the description: the YAML reader builds a protobuf Struct, the validator
// puts it on the node. Apart from yaml_config_reader_test and config_validator_test because it
// runs protobuf maps, which cannot run under TSan with Debian's uninstrumented libprotobuf
// (tests/CMakeLists.txt, label "grpc").
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/config/config_validator.h"
#include "server/config/yaml_config_reader.h"

namespace sluice {
namespace {

// Verifies the reader keeps metadata as a Struct with YAML's scalar types, null for YAML null,
// and a read error for anything but a map.
TEST(DescriptionMetadataTest, ReaderBuildsStruct) {
  YamlConfigReader reader(1'000'000, 1'000'000);
  absl::StatusOr<DomainDescription> domain = reader.Read("m.yaml", R"(domain: a
descriptors:
  - key: k
    metadata: {owner: edge, count: 3, quoted: "3"}
  - key: none
    metadata: ~
  - key: list
    metadata: [a]
)");
  ASSERT_TRUE(domain.ok()) << domain.status();
  const auto& descriptors = domain->descriptors.value;
  ASSERT_EQ(descriptors.size(), 3u);
  ASSERT_NE(descriptors[0].metadata.value, nullptr);
  const auto& fields = descriptors[0].metadata.value->fields();
  EXPECT_EQ(fields.at("owner").string_value(), "edge");
  EXPECT_EQ(fields.at("count").number_value(), 3);
  EXPECT_EQ(fields.at("quoted").string_value(), "3");
  EXPECT_EQ(descriptors[0].metadata.line, 4);
  EXPECT_TRUE(descriptors[1].metadata.given);
  EXPECT_EQ(descriptors[1].metadata.value, nullptr);
  EXPECT_EQ(descriptors[2].metadata.read_error.message(),
            "m.yaml:8: descriptors[2].metadata: expected a map, got a list");
}

// Verifies the validator puts a non-empty Struct on the node as given, and none for an empty
// one.
TEST(DescriptionMetadataTest, ValidatorAttachesNonEmptyStruct) {
  auto metadata = std::make_shared<google::protobuf::Struct>();
  (*metadata->mutable_fields())["team"].set_string_value("edge");
  auto describe = [](std::string key, std::shared_ptr<const google::protobuf::Struct> value) {
    DescriptorDescription descriptor;
    descriptor.line = 3;
    descriptor.key.given = true;
    descriptor.key.value = std::move(key);
    descriptor.metadata.given = true;
    descriptor.metadata.value = std::move(value);
    return descriptor;
  };
  DomainDescription domain;
  domain.source = "xds";
  domain.domain.given = true;
  domain.domain.value = "a";
  domain.descriptors.given = true;
  domain.descriptors.value.push_back(describe("with", metadata));
  domain.descriptors.value.push_back(
      describe("empty", std::make_shared<const google::protobuf::Struct>()));
  ConfigDescription description;
  description.domains.push_back(std::move(domain));
  absl::StatusOr<std::unique_ptr<Config>> config = ValidateConfig(std::move(description));
  ASSERT_TRUE(config.ok()) << config.status();
  const DescriptorNode& root = (*config)->FindDomain("a")->root;
  EXPECT_EQ(root.default_children.at("with")->metadata, metadata);
  EXPECT_EQ(root.default_children.at("empty")->metadata, nullptr);
}

}  // namespace
}  // namespace sluice
