#include "server/config/yaml_config_reader.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

class YamlConfigReaderTest : public ::testing::Test {
 protected:
  // Reads `text` as r.yaml, failing the test if the file as a whole is refused.
  DomainDescription Read(absl::string_view text) {
    absl::StatusOr<DomainDescription> domain = reader_.Read("r.yaml", text);
    EXPECT_TRUE(domain.ok()) << domain.status();
    return domain.ok() ? *std::move(domain) : DomainDescription();
  }
  // The error refusing `text` as a whole, or "".
  std::string FileError(absl::string_view text) {
    absl::StatusOr<DomainDescription> domain = reader_.Read("r.yaml", text);
    return domain.ok() ? "" : std::string(domain.status().message());
  }

  // The error refusing `text` as a whole under --strict_config, or "".
  std::string StrictFileError(absl::string_view text) {
    absl::StatusOr<DomainDescription> domain = strict_reader_.Read("r.yaml", text);
    return domain.ok() ? "" : std::string(domain.status().message());
  }

  YamlConfigReader reader_{1'000'000, 32 << 20};
  YamlConfigReader strict_reader_{1'000'000, 32 << 20, /*strict=*/true};
};

// Verifies every field is read with whether it was given and the line of its key, typed, and
// nothing is judged: an empty key and an unknown unit are the validator's to refuse.
TEST_F(YamlConfigReaderTest, ReadsFieldsWithTheirLines) {
  const DomainDescription domain = Read(R"(domain: api
failure_mode: local
descriptors:
  - key: ''
    value: v*
    shadow_mode: yes
    rate_limit:
      unit: fortnight
      requests_per_unit: 5
      burst: 7
      local_share: 0.5
      replaces: [{name: other}]
  - key: k2
    rate_limits:
      - {unit: second}
    descriptors: ~
)");
  EXPECT_EQ(domain.source, "r.yaml");
  EXPECT_EQ(domain.line, 1);
  EXPECT_EQ(domain.domain.value, "api");
  EXPECT_EQ(domain.failure_mode.value, "local");
  EXPECT_EQ(domain.failure_mode.line, 2);
  ASSERT_EQ(domain.descriptors.value.size(), 2u);
  EXPECT_EQ(domain.descriptors.line, 3);

  const DescriptorDescription& first = domain.descriptors.value[0];
  EXPECT_EQ(first.line, 4);
  EXPECT_TRUE(first.key.given);
  EXPECT_EQ(first.key.value, "");
  EXPECT_EQ(first.value.value, "v*");
  EXPECT_TRUE(first.shadow_mode.value);
  EXPECT_EQ(first.shadow_mode.line, 6);
  EXPECT_FALSE(first.detailed_metric.given);
  EXPECT_FALSE(first.metadata.given);
  ASSERT_TRUE(first.rate_limit.has_value());
  const RuleDescription& rule = *first.rate_limit;
  EXPECT_EQ(rule.line, 7);
  EXPECT_EQ(rule.unit.value, "fortnight");
  EXPECT_EQ(rule.unit.line, 8);
  EXPECT_EQ(rule.requests_per_unit.value, 5u);
  EXPECT_EQ(rule.burst.value, 7u);
  EXPECT_EQ(rule.local_share.value, 0.5);
  EXPECT_FALSE(rule.algorithm.given);
  ASSERT_EQ(rule.replaces.value.size(), 1u);
  EXPECT_EQ(rule.replaces.value[0].name.value, "other");
  EXPECT_EQ(rule.replaces.value[0].line, 12);
  EXPECT_FALSE(first.rate_limits.given);

  const DescriptorDescription& second = domain.descriptors.value[1];
  EXPECT_FALSE(second.rate_limit.has_value());
  ASSERT_EQ(second.rate_limits.value.size(), 1u);
  EXPECT_EQ(second.rate_limits.line, 14);
  EXPECT_EQ(second.rate_limits.value[0].line, 15);
  EXPECT_FALSE(second.rate_limits.value[0].requests_per_unit.given);
  EXPECT_TRUE(second.descriptors.given);
  EXPECT_TRUE(second.descriptors.value.empty());
}

// Verifies a value of the wrong type is kept on its field, with the whole message, and reading
// goes on: the validator decides whether the field matters.
TEST_F(YamlConfigReaderTest, KeepsTypeErrorsOnTheirFields) {
  const DomainDescription domain = Read(R"(domain: [a]
descriptors:
  - key: k
    detailed_metric: "true"
    rate_limit:
      unlimited: true
      requests_per_unit: lots
  - key: k2
)");
  EXPECT_TRUE(domain.domain.given);
  EXPECT_EQ(domain.domain.read_error.message(), "r.yaml:1: domain: expected a string, got a list");
  ASSERT_EQ(domain.descriptors.value.size(), 2u);
  const DescriptorDescription& first = domain.descriptors.value[0];
  EXPECT_EQ(first.detailed_metric.read_error.message(),
            "r.yaml:4: descriptors[0].detailed_metric: expected true or false, got the quoted "
            "string 'true'");
  EXPECT_TRUE(first.rate_limit->unlimited.value);
  EXPECT_TRUE(first.rate_limit->requests_per_unit.given);
  EXPECT_EQ(first.rate_limit->requests_per_unit.read_error.message(),
            "r.yaml:7: descriptors[0].rate_limit.requests_per_unit: expected an unsigned 32-bit "
            "integer, got 'lots'");
  EXPECT_EQ(domain.descriptors.value[1].key.value, "k2");
}

// Verifies a descriptor that cannot be read (an unknown key) carries the error, and reading
// stops there: nothing after it is read, as the validator never looks past it.
TEST_F(YamlConfigReaderTest, StopsAtAnUnreadableDescriptor) {
  const DomainDescription domain = Read(R"(domain: a
descriptors:
  - key: k
  - key: k2
    limit: 5
  - key: k3
)");
  ASSERT_EQ(domain.descriptors.value.size(), 2u);
  EXPECT_TRUE(domain.descriptors.value[0].read_error.ok());
  EXPECT_EQ(domain.descriptors.value[1].read_error.message(),
            "r.yaml:5: descriptors[1].limit: unknown key (expected key, value, rate_limit, "
            "rate_limits, shadow_mode, quota_mode, detailed_metric, value_to_metric, "
            "share_threshold, metadata, descriptors)");
  EXPECT_FALSE(domain.descriptors.value[1].key.given);

  const DomainDescription both = Read(R"(domain: a
descriptors:
  - key: k
    rate_limit: 5
    rate_limits: []
)");
  const DescriptorDescription& descriptor = both.descriptors.value[0];
  EXPECT_EQ(descriptor.rate_limit->read_error.message(),
            "r.yaml:4: descriptors[0].rate_limit: expected a map, got '5'");
  // Noted before the rule was read, so that the validator can refuse the pair first.
  EXPECT_TRUE(descriptor.rate_limits.given);
  EXPECT_EQ(descriptor.rate_limits.line, 5);
}

// Verifies a self-referencing alias is read no deeper than kMaxDescriptorDepth.
TEST_F(YamlConfigReaderTest, ReadsNoDeeperThanTheDepthLimit) {
  const DomainDescription domain =
      Read("domain: a\ndescriptors: &d\n  - key: k\n    descriptors: *d\n");
  const Field<std::vector<DescriptorDescription>>* list = &domain.descriptors;
  int depth = 1;
  while (!list->value.empty()) {
    list = &list->value[0].descriptors;
    ++depth;
  }
  EXPECT_EQ(depth, kMaxDescriptorDepth + 1);
  EXPECT_THAT(std::string(list->read_error.message()),
              ::testing::EndsWith("descriptors nested more than 64 levels deep"));
}

// Verifies merge keys fill fields the map does not give itself, with the merged key's line.
TEST_F(YamlConfigReaderTest, ReadsMergeKeys) {
  const DomainDescription domain = Read(R"(domain: a
descriptors:
  - key: k
    rate_limit: &limit
      unit: second
      requests_per_unit: 3
  - key: k2
    rate_limit:
      <<: *limit
      requests_per_unit: 4
)");
  const RuleDescription& merged = *domain.descriptors.value[1].rate_limit;
  EXPECT_EQ(merged.unit.value, "second");
  EXPECT_EQ(merged.unit.line, 5);
  EXPECT_EQ(merged.requests_per_unit.value, 4u);
  EXPECT_EQ(merged.requests_per_unit.line, 10);
}

// Verifies what is read leniently is in the description's warnings, in reading order, and
// the description holds the last of a repeated key and nothing of a key out of place.
TEST_F(YamlConfigReaderTest, RecordsLenientReadingsAsWarnings) {
  const DomainDescription domain = Read(R"(domain: a
domain: b
value: x
descriptors:
  - key: k
    rate_limit: {unit: second, quota_mode: true}
)");
  EXPECT_EQ(domain.domain.value, "b");
  EXPECT_EQ(domain.domain.line, 2);
  ASSERT_EQ(domain.descriptors.value.size(), 1u);
  EXPECT_FALSE(domain.descriptors.value[0].quota_mode.given);
  EXPECT_THAT(domain.warnings,
              ::testing::ElementsAre(
                  ::testing::StartsWith("r.yaml:2: domain: given twice (also at line 1)"),
                  ::testing::StartsWith("r.yaml:3: value: ignored: not a key of the top level"),
                  ::testing::StartsWith("r.yaml:6: descriptors[0].rate_limit.quota_mode: "
                                        "ignored: not a key of a rate limit")));
  EXPECT_TRUE(Read("domain: a\n").warnings.empty());
}

// Verifies the warnings of one file are bounded: an alias can repeat one a million times.
TEST_F(YamlConfigReaderTest, BoundsTheWarnings) {
  std::string text = "domain: a\nkey: &r {unit: 1, unit: 2}\ndescriptors:\n";
  for (int i = 0; i < 300; ++i) {
    text += "  - {key: k" + std::to_string(i) + ", unit: *r}\n";
  }
  const DomainDescription domain = Read(text);
  ASSERT_EQ(domain.warnings.size(), 101u);
  EXPECT_THAT(domain.warnings.back(), ::testing::MatchesRegex("r.yaml: [0-9]+ more warnings like "
                                                              "these not listed"));
}

// Verifies problems of the file as a whole are returned, not recorded.
TEST_F(YamlConfigReaderTest, RefusesTheFileAsAWhole) {
  EXPECT_EQ(FileError(""),
            "r.yaml:1: file is empty (expected a map with 'domain' and "
            "'descriptors')");
  EXPECT_EQ(FileError("- a\n"),
            "r.yaml:1: expected a map with 'domain' and 'descriptors' at "
            "the top of the file, got a list");
  EXPECT_EQ(FileError("domain: a\nversion: 2\n"),
            "r.yaml:2: version: unknown key (expected domain, descriptors, failure_mode)");
  EXPECT_EQ(StrictFileError("domain: a\ndomain: b\n"),
            "r.yaml:2: domain: duplicate key (first given at line 1)");
  EXPECT_EQ(StrictFileError("domain: a\nunit: second\n"),
            "r.yaml:2: unit: not a key of the top level (unit belongs in a rate_limit); "
            "envoyproxy/ratelimit ignores it here, --strict_config refuses it");
  EXPECT_EQ(StrictFileError("domain: a\n---\ndomain: b\n"),
            "r.yaml:3: more than one YAML document in the file (one file holds one domain)");
  EXPECT_THAT(Read("domain: a\n---\ndomain: b\n").warnings,
              ::testing::ElementsAre(::testing::StartsWith(
                  "r.yaml:3: ignored from here to the end of the file: a second YAML document")));
  EXPECT_EQ(FileError("domain: [a\n"),
            "r.yaml:2: YAML syntax error: end of sequence flow not found (column 1)");
}

// Verifies one reader's budget spans every file it reads.
TEST_F(YamlConfigReaderTest, BudgetSpansFiles) {
  YamlConfigReader reader(/*max_nodes=*/10, /*max_scalar_bytes=*/1000);
  // 5 nodes: the map, two keys, two values.
  ASSERT_TRUE(reader.Read("a.yaml", "domain: a\nfailure_mode: deny\n").ok());
  ASSERT_TRUE(reader.Read("b.yaml", "domain: b\nfailure_mode: deny\n").ok());
  absl::StatusOr<DomainDescription> third = reader.Read("c.yaml", "domain: c\n");
  ASSERT_FALSE(third.ok());
  EXPECT_THAT(std::string(third.status().message()),
              ::testing::StartsWith("c.yaml:1: the configuration grows past 10 YAML nodes"));
}

}  // namespace
}  // namespace sluice
