#include "server/config/config_validator.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"

namespace sluice {
namespace {

// Descriptions are built here field by field, as a source other than YAML (xDS) would build
// them: nothing in this file parses text, except the one test that compares with the loader.

template <typename T>
Field<T> Given(T value, int line) {
  Field<T> field;
  field.given = true;
  field.value = std::move(value);
  field.line = line;
  return field;
}

RuleDescription Rule(int line, std::string unit, uint32_t requests_per_unit) {
  RuleDescription rule;
  rule.line = line;
  rule.unit = Given(std::move(unit), line);
  rule.requests_per_unit = Given(requests_per_unit, line);
  return rule;
}

DescriptorDescription Descriptor(int line, std::string key, std::string value = "") {
  DescriptorDescription descriptor;
  descriptor.line = line;
  descriptor.key = Given(std::move(key), line);
  if (!value.empty()) {
    descriptor.value = Given(std::move(value), line);
  }
  return descriptor;
}

DescriptorDescription WithRule(DescriptorDescription descriptor, RuleDescription rule) {
  descriptor.rate_limit = std::move(rule);
  return descriptor;
}

DescriptorDescription WithChildren(DescriptorDescription descriptor,
                                   std::vector<DescriptorDescription> children) {
  descriptor.descriptors = Given(std::move(children), descriptor.line + 1);
  return descriptor;
}

DomainDescription DescribeDomain(std::string source, std::string name,
                                 std::vector<DescriptorDescription> descriptors = {}) {
  DomainDescription domain;
  domain.source = std::move(source);
  domain.line = 1;
  domain.domain = Given(std::move(name), 1);
  if (!descriptors.empty()) {
    domain.descriptors = Given(std::move(descriptors), 2);
  }
  return domain;
}

class ConfigValidatorTest : public ::testing::Test {
 protected:
  static absl::StatusOr<std::unique_ptr<Config>> Validate(std::vector<DomainDescription> domains,
                                                          bool merge_domains = false) {
    ConfigDescription description;
    description.domains = std::move(domains);
    ValidateOptions options;
    options.merge_domains = merge_domains;
    return ValidateConfig(std::move(description), options);
  }

  // The error of validating `domain`, or "" when it is valid.
  static std::string Error(DomainDescription domain) {
    std::vector<DomainDescription> domains;
    domains.push_back(std::move(domain));
    absl::StatusOr<std::unique_ptr<Config>> config = Validate(std::move(domains));
    if (config.ok()) {
      return "";
    }
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(config.status().message());
  }
};

// Verifies a description becomes the tree the decision path matches: exact, wildcard and
// default children, full keys, flags, derived rule fields and the node's place.
TEST_F(ConfigValidatorTest, BuildsTheDescriptorTree) {
  DescriptorDescription path = WithRule(Descriptor(4, "path", "/v1/*"), Rule(5, "MINUTE", 7));
  path.shadow_mode = Given(true, 6);
  path.share_threshold = Given(true, 7);
  DescriptorDescription client =
      WithChildren(WithRule(Descriptor(2, "client"), Rule(3, "second", 10)), {std::move(path)});
  client.quota_mode = Given(true, 2);
  std::vector<DescriptorDescription> top;
  top.push_back(std::move(client));
  top.push_back(WithRule(Descriptor(8, "db", "users"), Rule(9, "hour", 500)));
  absl::StatusOr<std::unique_ptr<Config>> config =
      Validate({DescribeDomain("api.xds", "api", std::move(top))});
  ASSERT_TRUE(config.ok()) << config.status();

  EXPECT_EQ((*config)->RuleCount(), 3u);
  const DescriptorEntryView request[] = {{"client", "c1"}, {"path", "/v1/users"}};
  const DescriptorNode* node = (*config)->Match("api", request);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->full_key, "api.client.path_/v1/*");
  EXPECT_TRUE(node->shadow_mode);
  EXPECT_TRUE(node->share_threshold);
  EXPECT_EQ(node->file, "api.xds");
  EXPECT_EQ(node->line, 4);
  ASSERT_EQ(node->rules.size(), 1u);
  EXPECT_EQ(node->rules[0].unit, TimeUnit::kMinute);
  EXPECT_EQ(node->rules[0].params.period_us, 60'000'000);
  EXPECT_EQ(node->rules[0].params.limit, 7u);
  EXPECT_EQ(node->rules[0].key_suffix, "fw:60");
  const DescriptorEntryView db[] = {{"db", "users"}};
  ASSERT_NE((*config)->Match("api", db), nullptr);
  EXPECT_EQ((*config)->Match("api", db)->full_key, "api.db_users");
  const Domain* domain = (*config)->FindDomain("api");
  ASSERT_NE(domain, nullptr);
  EXPECT_EQ(domain->file, "api.xds");
  EXPECT_TRUE(domain->root.default_children.at("client")->quota_mode);
}

// Verifies a description and the YAML that says the same thing give the same Config, listing
// and warnings: the loader is one reader in front of this validator.
TEST_F(ConfigValidatorTest, SameConfigAsTheYamlThatSaysTheSame) {
  absl::StatusOr<std::unique_ptr<Config>> loaded = LoadConfigText("same.yaml", R"(domain: same
failure_mode: deny
descriptors:
  - key: client
    rate_limits:
      - {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20, name: b}
      - {unit: day, unit_multiplier: 2, local_share: 0.25}
)");
  ASSERT_TRUE(loaded.ok()) << loaded.status();

  RuleDescription bucket = Rule(6, "second", 10);
  bucket.algorithm = Given(std::string("token_bucket"), 6);
  bucket.burst = Given(uint32_t{20}, 6);
  bucket.name = Given(std::string("b"), 6);
  RuleDescription daily = Rule(7, "day", 0);
  daily.requests_per_unit = Field<uint32_t>();
  daily.unit_multiplier = Given(uint32_t{2}, 7);
  daily.local_share = Given(0.25, 7);
  DescriptorDescription client = Descriptor(4, "client");
  client.rate_limits = Given(std::vector<RuleDescription>{}, 5);
  client.rate_limits.value.push_back(std::move(bucket));
  client.rate_limits.value.push_back(std::move(daily));
  DomainDescription domain = DescribeDomain("same.yaml", "same", {std::move(client)});
  domain.failure_mode = Given(std::string("deny"), 2);
  domain.descriptors.line = 3;
  absl::StatusOr<std::unique_ptr<Config>> described = Validate({std::move(domain)});
  ASSERT_TRUE(described.ok()) << described.status();

  EXPECT_EQ((*described)->Dump(),
            "same: failure_mode=deny (same.yaml:2)\n"
            "same.client: requests_per_unit=10 unit=second algorithm=token_bucket burst=20 "
            "key_suffix=tb:1 name=b shadow_mode=false (same.yaml:4)\n"
            "same.client: requests_per_unit=0 unit=day unit_multiplier=2 "
            "algorithm=fixed_window key_suffix=fw:172800 local_share=0.25 shadow_mode=false "
            "(same.yaml:4)\n");
  EXPECT_EQ((*described)->Dump(), (*loaded)->Dump());
  EXPECT_THAT((*described)->warnings(),
              ::testing::ElementsAre("same.yaml:7: descriptors[0].rate_limits[1]."
                                     "requests_per_unit: missing: the limit is 0, so every "
                                     "request with hits is OVER_LIMIT"));
  EXPECT_EQ((*described)->warnings(), (*loaded)->warnings());
}

// Verifies a source without lines (an xDS resource) gets messages "<resource>: <path>: <what>".
TEST_F(ConfigValidatorTest, MessagesOfSourcesWithoutLines) {
  DomainDescription domain = DescribeDomain("rls/api", "api", {});
  domain.domain.line = 0;
  domain.line = 0;
  domain.failure_mode = Given(std::string("open"), 0);
  EXPECT_EQ(Error(std::move(domain)),
            "rls/api: failure_mode: invalid failure mode 'open' (expected allow, deny or local)");

  DomainDescription unit =
      DescribeDomain("rls/api", "api", {WithRule(Descriptor(0, "k"), Rule(0, "UNKNOWN", 5))});
  EXPECT_EQ(Error(std::move(unit)),
            "rls/api: descriptors[0].rate_limit.unit: invalid unit 'UNKNOWN' (expected second, "
            "minute, hour, day, week, month or year)");

  DomainDescription mode = DescribeDomain("rls/api", "api", {});
  mode.domain.line = 0;
  mode.failure_mode = Given(std::string("local"), 0);
  absl::StatusOr<std::unique_ptr<Config>> config = Validate({std::move(mode)});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->FindDomain("api")->failure_mode_at, "rls/api");
}

// Verifies the domain's name is required and not empty.
TEST_F(ConfigValidatorTest, RefusesMissingOrEmptyDomain) {
  DomainDescription missing = DescribeDomain("a.yaml", "x");
  missing.domain = Field<std::string>();
  missing.line = 3;
  EXPECT_EQ(Error(std::move(missing)),
            "a.yaml:3: domain: missing (every file needs a non-empty domain)");
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "")), "a.yaml:1: domain: must not be empty");
}

// Verifies a descriptor's key is required, and share_threshold needs a wildcard value.
TEST_F(ConfigValidatorTest, RefusesBadDescriptorFields) {
  DescriptorDescription keyless = Descriptor(4, "k");
  keyless.key = Field<std::string>();
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", {std::move(keyless)})),
            "a.yaml:4: descriptors[0].key: missing (every descriptor needs a key)");
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", {Descriptor(4, "")})),
            "a.yaml:4: descriptors[0].key: must not be empty");
  DescriptorDescription shared = Descriptor(4, "k", "v");
  shared.share_threshold = Given(true, 6);
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", {std::move(shared)})),
            "a.yaml:6: descriptors[0].share_threshold: only a wildcard (a key or value "
            "containing '*') can share its threshold, but neither key 'k' nor value 'v' holds "
            "one");
}

// Verifies duplicates under one parent are refused for exact, default and wildcard values, and
// two "key_value" names that coincide.
TEST_F(ConfigValidatorTest, RefusesDuplicateDescriptors) {
  EXPECT_EQ(
      Error(DescribeDomain("a.yaml", "a", {Descriptor(3, "k", "v"), Descriptor(5, "k", "v")})),
      "a.yaml:5: descriptors[1]: duplicate descriptor: key 'k' value 'v' is already "
      "defined at line 3");
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", {Descriptor(3, "k"), Descriptor(5, "k")})),
            "a.yaml:5: descriptors[1]: duplicate descriptor: key 'k' without a value is already "
            "defined at line 3");
  EXPECT_EQ(
      Error(DescribeDomain("a.yaml", "a", {Descriptor(3, "k", "p*"), Descriptor(5, "k", "p*")})),
      "a.yaml:5: descriptors[1]: duplicate descriptor: key 'k' value 'p*' is already "
      "defined at line 3");
  EXPECT_EQ(
      Error(DescribeDomain("a.yaml", "a", {Descriptor(3, "a_b", "c"), Descriptor(5, "a", "b_c")})),
      "a.yaml:5: descriptors[1]: descriptor key 'a' value 'b_c' has the same composite key "
      "'a_b_c' as key 'a_b' value 'c' at line 3");
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a",
                                 {WithChildren(Descriptor(3, "p", "1"), {Descriptor(5, "k")}),
                                  WithChildren(Descriptor(6, "p", "2"), {Descriptor(8, "k")})})),
            "");
}

// Verifies wildcard siblings are tried in the order the description gives them.
TEST_F(ConfigValidatorTest, KeepsWildcardsInDeclarationOrder) {
  absl::StatusOr<std::unique_ptr<Config>> config =
      Validate({DescribeDomain("a.yaml", "a",
                               {WithRule(Descriptor(3, "p", "/v1/*"), Rule(3, "second", 1)),
                                WithRule(Descriptor(5, "p", "/*"), Rule(5, "second", 2))})});
  ASSERT_TRUE(config.ok()) << config.status();
  const DescriptorEntryView v1[] = {{"p", "/v1/x"}};
  const DescriptorEntryView v2[] = {{"p", "/v2/x"}};
  EXPECT_EQ((*config)->Match("a", v1)->rules[0].requests_per_unit, 1u);
  EXPECT_EQ((*config)->Match("a", v2)->rules[0].requests_per_unit, 2u);
}

// Verifies a tree deeper than kMaxDescriptorDepth is refused whatever its source, at the list
// that goes one level too deep.
TEST_F(ConfigValidatorTest, RefusesTreesNestedTooDeeply) {
  auto chain = [](int depth) {
    DescriptorDescription node = WithRule(Descriptor(depth, "k"), Rule(depth, "second", 1));
    for (int level = depth - 1; level >= 1; --level) {
      node = WithChildren(Descriptor(level, "k"), {std::move(node)});
    }
    return node;
  };
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", {chain(kMaxDescriptorDepth)})), "");
  const std::string error = Error(DescribeDomain("a.yaml", "a", {chain(kMaxDescriptorDepth + 1)}));
  EXPECT_THAT(error, ::testing::StartsWith("a.yaml:65: descriptors[0].descriptors[0]"));
  EXPECT_THAT(error, ::testing::EndsWith(
                         ".descriptors[0].descriptors: descriptors nested more than 64 levels "
                         "deep"));
}

// Verifies a problem the source recorded is reported where the validator reaches it: after the
// validator's own problems that come before it, before those that come after.
TEST_F(ConfigValidatorTest, ReportsSourceProblemsInWalkOrder) {
  DescriptorDescription unreadable = Descriptor(7, "k2");
  unreadable.shadow_mode = Given(false, 8);
  unreadable.shadow_mode.read_error =
      absl::InvalidArgumentError("a.yaml:8: descriptors[1].shadow_mode: expected true or false");
  std::vector<DescriptorDescription> bad_first;
  bad_first.push_back(WithRule(Descriptor(3, "k"), Rule(4, "fortnight", 1)));
  bad_first.push_back(unreadable);
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", std::move(bad_first))),
            "a.yaml:4: descriptors[0].rate_limit.unit: invalid unit 'fortnight' (expected "
            "second, minute, hour, day, week, month or year)");

  std::vector<DescriptorDescription> unreadable_first;
  unreadable_first.push_back(Descriptor(3, "k"));
  unreadable_first.push_back(unreadable);
  unreadable_first.push_back(Descriptor(9, "k"));  // a duplicate, after the unreadable one
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", std::move(unreadable_first))),
            "a.yaml:8: descriptors[1].shadow_mode: expected true or false");

  DescriptorDescription unreadable_item = Descriptor(3, "k");
  unreadable_item.read_error = absl::InvalidArgumentError("a.yaml:3: descriptors[0]: not a map");
  EXPECT_EQ(Error(DescribeDomain("a.yaml", "a", {unreadable_item})),
            "a.yaml:3: descriptors[0]: not a map");
}

// Verifies an unlimited rule ignores its requests_per_unit, even one the source could not read,
// with a warning, as envoyproxy/ratelimit ignores it.
TEST_F(ConfigValidatorTest, UnlimitedRuleIgnoresUnreadableNumber) {
  RuleDescription free;
  free.line = 4;
  free.unlimited = Given(true, 5);
  free.requests_per_unit.given = true;
  free.requests_per_unit.line = 6;
  free.requests_per_unit.read_error = absl::InvalidArgumentError("a.yaml:6: not a number");
  absl::StatusOr<std::unique_ptr<Config>> config =
      Validate({DescribeDomain("a.yaml", "a", {WithRule(Descriptor(3, "k"), std::move(free))})});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT((*config)->warnings(),
              ::testing::ElementsAre("a.yaml:6: descriptors[0].rate_limit.requests_per_unit: "
                                     "ignored: the rule is unlimited (remove requests_per_unit "
                                     "or unlimited)"));
}

// Verifies a second description of a domain is refused, naming the first, unless domains
// merge; merged ones add descriptors, may set failure_mode once or alike, and still refuse a
// descriptor given in both.
TEST_F(ConfigValidatorTest, DuplicateAndMergedDomains) {
  absl::StatusOr<std::unique_ptr<Config>> config =
      Validate({DescribeDomain("a.yaml", "x"), DescribeDomain("b.yaml", "x")});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "b.yaml:1: domain: duplicate domain 'x' (first defined in a.yaml; "
            "--merge_domain_config merges files of one domain)");

  DomainDescription second =
      DescribeDomain("b.yaml", "x", {WithRule(Descriptor(3, "b"), Rule(4, "second", 2))});
  second.failure_mode = Given(std::string("local"), 2);
  config =
      Validate({DescribeDomain("a.yaml", "x", {WithRule(Descriptor(3, "a"), Rule(4, "second", 1))}),
                std::move(second)},
               /*merge_domains=*/true);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->RuleCount(), 2u);
  EXPECT_EQ((*config)->FindDomain("x")->failure_mode, FailureMode::kLocal);
  EXPECT_EQ((*config)->FindDomain("x")->failure_mode_at, "b.yaml:2");

  DomainDescription deny = DescribeDomain("a.yaml", "x");
  deny.failure_mode = Given(std::string("deny"), 2);
  DomainDescription local = DescribeDomain("b.yaml", "x");
  local.failure_mode = Given(std::string("local"), 3);
  config = Validate({std::move(deny), std::move(local)}, /*merge_domains=*/true);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "b.yaml:3: failure_mode: 'local' conflicts with 'deny' of domain 'x' at a.yaml:2");

  config = Validate(
      {DescribeDomain("a.yaml", "x", {Descriptor(3, "w", "p*")}),
       DescribeDomain("b.yaml", "x", {Descriptor(4, "w", "q*"), Descriptor(6, "w", "p*")})},
      /*merge_domains=*/true);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "b.yaml:6: duplicate descriptor: key 'w' value 'p*' of domain 'x' is already "
            "defined at a.yaml:3");
}

// Verifies domains added one at a time build one Config, and that no domain gives an empty one.
TEST_F(ConfigValidatorTest, AddsDomainsOneAtATime) {
  ConfigValidator validator;
  ASSERT_TRUE(validator
                  .AddDomain(DescribeDomain("a.yaml", "a",
                                            {WithRule(Descriptor(3, "k"), Rule(4, "second", 1))}))
                  .ok());
  ASSERT_TRUE(validator.AddDomain(DescribeDomain("b.yaml", "b")).ok());
  std::unique_ptr<Config> config = validator.Finish();
  EXPECT_TRUE(config->HasDomain("a"));
  EXPECT_TRUE(config->HasDomain("b"));
  EXPECT_EQ(config->RuleCount(), 1u);

  absl::StatusOr<std::unique_ptr<Config>> empty = Validate({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)->domains().empty());
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Verifies a backend that keeps fixed windows only (memcached) refuses a rule of another
// algorithm, naming the file, the algorithm's line and why, in rate_limit and in rate_limits;
// fixed windows and unlimited rules load, and a descriptor's several rules are marked as sharing
// it (their memcached keys name the period).
TEST(ConfigValidatorBackendTest, FixedWindowsOnlyBackendRefusesOtherAlgorithms) {
  ValidateOptions options;
  options.fixed_windows_only = "memcached";
  RuleDescription bucket = Rule(5, "second", 10);
  bucket.algorithm = Given(std::string("token_bucket"), 6);
  ConfigDescription single;
  single.domains.push_back(
      DescribeDomain("a.yaml", "a", {WithRule(Descriptor(4, "k"), std::move(bucket))}));
  absl::StatusOr<std::unique_ptr<Config>> refused = ValidateConfig(std::move(single), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::StartsWith("a.yaml:6: descriptors[0].rate_limit.algorithm: "
                                    "token_bucket is not kept by --backend=memcached"));

  DescriptorDescription several = Descriptor(4, "k");
  RuleDescription log = Rule(7, "minute", 3);
  log.algorithm = Given(std::string("sliding_window_log"), 8);
  several.rate_limits = Given(std::vector<RuleDescription>{}, 5);
  several.rate_limits.value.push_back(Rule(6, "second", 10));
  several.rate_limits.value.push_back(std::move(log));
  ConfigDescription list;
  list.domains.push_back(DescribeDomain("b.yaml", "b", {std::move(several)}));
  refused = ValidateConfig(std::move(list), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::StartsWith("b.yaml:8: descriptors[0].rate_limits[1].algorithm: "
                                    "sliding_window_log is not kept"));

  DescriptorDescription windows = Descriptor(4, "k");
  windows.rate_limits = Given(std::vector<RuleDescription>{}, 5);
  windows.rate_limits.value.push_back(Rule(6, "second", 10));
  windows.rate_limits.value.push_back(Rule(7, "hour", 100));
  ConfigDescription fine;
  fine.domains.push_back(DescribeDomain("c.yaml", "c", {std::move(windows)}));
  absl::StatusOr<std::unique_ptr<Config>> loaded = ValidateConfig(std::move(fine), options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const auto& rules = (*loaded)->FindDomain("c")->root.default_children.at("k")->rules;
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_TRUE(rules[0].params.shares_descriptor);
  EXPECT_TRUE(rules[1].params.shares_descriptor);
}

}  // namespace
}  // namespace sluice
