#include "server/config/config_loader.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// The test texts start with a newline after R"( so that they can be indented like a file;
// dropping it makes line 1 of the YAML the first line after R"(.
std::string Yaml(absl::string_view text) {
  if (!text.empty() && text[0] == '\n') {
    text.remove_prefix(1);
  }
  return std::string(text);
}

std::string StrictLoadError(absl::string_view text);

class ConfigLoaderTest : public ::testing::Test {
 protected:
  // Loads `text` as test.yaml; returns the error message, or "" if it loaded.
  static std::string LoadError(absl::string_view text) {
    absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigText("test.yaml", Yaml(text));
    if (config.ok()) {
      return "";
    }
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(config.status().message());
  }

  // Loads `text` as test.yaml, failing the test if it does not load.
  static std::unique_ptr<Config> Load(absl::string_view text) {
    absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigText("test.yaml", Yaml(text));
    EXPECT_TRUE(config.ok()) << config.status();
    return config.ok() ? *std::move(config) : std::make_unique<Config>();
  }

  // The node reached from `domain`'s root through exact "key_value" / default "key" names.
  static const DescriptorNode* Node(const Config& config, absl::string_view domain,
                                    std::vector<std::string> path) {
    auto it = config.domains().find(domain);
    if (it == config.domains().end()) {
      return nullptr;
    }
    const DescriptorNode* node = &it->second->root;
    for (const std::string& name : path) {
      if (auto exact = node->exact_children.find(name); exact != node->exact_children.end()) {
        node = exact->second.get();
      } else if (auto dflt = node->default_children.find(name);
                 dflt != node->default_children.end()) {
        node = dflt->second.get();
      } else {
        return nullptr;
      }
    }
    return node;
  }
};

// ---- Units.

// Verifies the seconds in each unit, with envoyproxy/ratelimit's 30-day month and 365-day year.
TEST_F(ConfigLoaderTest, UnitSecondsAndNames) {
  EXPECT_EQ(UnitSeconds(TimeUnit::kSecond), 1);
  EXPECT_EQ(UnitSeconds(TimeUnit::kMinute), 60);
  EXPECT_EQ(UnitSeconds(TimeUnit::kHour), 3600);
  EXPECT_EQ(UnitSeconds(TimeUnit::kDay), 86400);
  EXPECT_EQ(UnitSeconds(TimeUnit::kWeek), 604800);
  EXPECT_EQ(UnitSeconds(TimeUnit::kMonth), 2592000);
  EXPECT_EQ(UnitSeconds(TimeUnit::kYear), 31536000);
  EXPECT_EQ(UnitName(TimeUnit::kSecond), "second");
  EXPECT_EQ(UnitName(TimeUnit::kMinute), "minute");
  EXPECT_EQ(UnitName(TimeUnit::kHour), "hour");
  EXPECT_EQ(UnitName(TimeUnit::kDay), "day");
  EXPECT_EQ(UnitName(TimeUnit::kWeek), "week");
  EXPECT_EQ(UnitName(TimeUnit::kMonth), "month");
  EXPECT_EQ(UnitName(TimeUnit::kYear), "year");
}

// ---- Successful loads.

// Verifies envoyproxy/ratelimit's README example 1 loads with every derived field filled in.
TEST_F(ConfigLoaderTest, LoadsPlainConfigWithDerivedFields) {
  std::unique_ptr<Config> config = Load(R"(
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
)");
  ASSERT_TRUE(config->HasDomain("mongo_cps"));
  EXPECT_FALSE(config->HasDomain("mongo"));
  EXPECT_EQ(config->RuleCount(), 2u);
  const Domain& domain = *config->domains().at("mongo_cps");
  EXPECT_EQ(domain.name, "mongo_cps");
  EXPECT_EQ(domain.file, "test.yaml");
  EXPECT_EQ(domain.root.exact_children.size(), 2u);
  EXPECT_TRUE(domain.root.default_children.empty());
  EXPECT_TRUE(domain.root.wildcard_children.empty());

  const DescriptorNode* users = Node(*config, "mongo_cps", {"database_users"});
  ASSERT_NE(users, nullptr);
  EXPECT_EQ(users->key, "database");
  EXPECT_EQ(users->value, "users");
  EXPECT_EQ(users->full_key, "mongo_cps.database_users");
  EXPECT_EQ(users->file, "test.yaml");
  EXPECT_EQ(users->line, 3);
  EXPECT_FALSE(users->shadow_mode);
  EXPECT_FALSE(users->detailed_metric);
  ASSERT_EQ(users->rules.size(), 1u);
  const RateLimitRule& rule = users->rules[0];
  EXPECT_FALSE(rule.unlimited);
  EXPECT_EQ(rule.requests_per_unit, 500u);
  EXPECT_EQ(rule.unit, TimeUnit::kSecond);
  EXPECT_EQ(rule.unit_multiplier, 1u);
  EXPECT_EQ(rule.params.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(rule.params.limit, 500u);
  EXPECT_EQ(rule.params.period_us, 1'000'000);
  EXPECT_EQ(rule.params.burst, 500u);
  EXPECT_EQ(rule.key_suffix, "fw:1");
  EXPECT_TRUE(rule.name.empty());
  EXPECT_TRUE(rule.replaces.empty());

  const DescriptorNode* dflt = Node(*config, "mongo_cps", {"database_default"});
  ASSERT_NE(dflt, nullptr);
  EXPECT_EQ(dflt->line, 9);
}

// Verifies every Sluice extension and every optional envoyproxy/ratelimit field is read.
TEST_F(ConfigLoaderTest, LoadsAllExtensions) {
  std::unique_ptr<Config> config = Load(R"(
domain: api
descriptors:
  - key: client
    shadow_mode: true
    detailed_metric: true
    rate_limits:
      - unit: second
        requests_per_unit: 10
        algorithm: token_bucket
        burst: 20
      - unit: Day
        requests_per_unit: 1000
      - unit: MINUTE
        requests_per_unit: 50
        unit_multiplier: 5
        algorithm: sliding_window_counter
    descriptors:
      - key: path
        value: /v1/*
        rate_limit:
          name: v1_paths
          replaces: [{name: client_default}, {name: other}]
          unit: hour
          requests_per_unit: 7
          algorithm: gcra
  - key: internal
    rate_limit:
      unlimited: true
      name: internal
  - key: leaky
    rate_limit:
      unit: week
      requests_per_unit: 3
      algorithm: leaky_bucket
  - key: log
    rate_limit:
      unit: month
      requests_per_unit: 4
      algorithm: sliding_window_log
  - key: yearly
    rate_limit:
      unit: year
      requests_per_unit: 4294967295
      unit_multiplier: 2
)");
  EXPECT_EQ(config->RuleCount(), 6u);

  const DescriptorNode* client = Node(*config, "api", {"client"});
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->shadow_mode);
  EXPECT_TRUE(client->detailed_metric);
  EXPECT_EQ(client->full_key, "api.client");
  ASSERT_EQ(client->rules.size(), 3u);
  EXPECT_EQ(client->rules[0].params.algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(client->rules[0].params.limit, 10u);
  EXPECT_EQ(client->rules[0].params.burst, 20u);
  EXPECT_EQ(client->rules[0].params.period_us, 1'000'000);
  EXPECT_EQ(client->rules[0].key_suffix, "tb:1");
  EXPECT_EQ(client->rules[1].unit, TimeUnit::kDay);
  EXPECT_EQ(client->rules[1].params.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(client->rules[1].params.period_us, 86'400'000'000);
  EXPECT_EQ(client->rules[1].key_suffix, "fw:86400");
  EXPECT_EQ(client->rules[2].unit, TimeUnit::kMinute);
  EXPECT_EQ(client->rules[2].unit_multiplier, 5u);
  EXPECT_EQ(client->rules[2].params.algorithm, Algorithm::kSlidingWindowCounter);
  EXPECT_EQ(client->rules[2].params.period_us, 300'000'000);
  EXPECT_EQ(client->rules[2].key_suffix, "swc:300");

  ASSERT_EQ(client->wildcard_children.size(), 1u);
  const DescriptorNode& path = *client->wildcard_children[0];
  EXPECT_EQ(path.key, "path");
  EXPECT_EQ(path.value, "/v1/*");
  EXPECT_EQ(path.full_key, "api.client.path_/v1/*");
  EXPECT_EQ(path.line, 18);
  ASSERT_EQ(path.rules.size(), 1u);
  EXPECT_EQ(path.rules[0].name, "v1_paths");
  EXPECT_THAT(path.rules[0].replaces, ::testing::ElementsAre("client_default", "other"));
  EXPECT_EQ(path.rules[0].params.algorithm, Algorithm::kGcra);
  EXPECT_EQ(path.rules[0].params.burst, 7u);  // defaults to requests_per_unit
  EXPECT_EQ(path.rules[0].key_suffix, "gcra:3600");

  const DescriptorNode* internal = Node(*config, "api", {"internal"});
  ASSERT_NE(internal, nullptr);
  ASSERT_EQ(internal->rules.size(), 1u);
  EXPECT_TRUE(internal->rules[0].unlimited);
  EXPECT_EQ(internal->rules[0].name, "internal");

  const DescriptorNode* leaky = Node(*config, "api", {"leaky"});
  ASSERT_NE(leaky, nullptr);
  EXPECT_EQ(leaky->rules[0].params.algorithm, Algorithm::kLeakyBucket);
  EXPECT_EQ(leaky->rules[0].params.period_us, 604'800'000'000);
  EXPECT_EQ(leaky->rules[0].params.burst, 3u);
  EXPECT_EQ(leaky->rules[0].key_suffix, "lb:604800");

  const DescriptorNode* log = Node(*config, "api", {"log"});
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->rules[0].params.algorithm, Algorithm::kSlidingWindowLog);
  EXPECT_EQ(log->rules[0].key_suffix, "swl:2592000");

  const DescriptorNode* yearly = Node(*config, "api", {"yearly"});
  ASSERT_NE(yearly, nullptr);
  EXPECT_EQ(yearly->rules[0].requests_per_unit, 4294967295u);
  EXPECT_EQ(yearly->rules[0].params.period_us, int64_t{2} * 31'536'000 * 1'000'000);
  EXPECT_EQ(yearly->rules[0].key_suffix, "fw:63072000");
}

// Verifies the nested full_key uses envoyproxy/ratelimit's stat-key form.
TEST_F(ConfigLoaderTest, BuildsNestedFullKeys) {
  std::unique_ptr<Config> config = Load(R"(
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
)");
  const DescriptorNode* placeholder = Node(*config, "messaging", {"message_type_marketing"});
  ASSERT_NE(placeholder, nullptr);
  EXPECT_EQ(placeholder->full_key, "messaging.message_type_marketing");
  EXPECT_TRUE(placeholder->rules.empty());
  const DescriptorNode* to_number =
      Node(*config, "messaging", {"message_type_marketing", "to_number"});
  ASSERT_NE(to_number, nullptr);
  EXPECT_EQ(to_number->full_key, "messaging.message_type_marketing.to_number");
  EXPECT_EQ(to_number->line, 6);
  EXPECT_EQ(config->RuleCount(), 1u);
}

// Verifies YAML forms that envoyproxy/ratelimit (yaml.v2) accepts: YAML 1.1 booleans, numbers
// and null as string values, null lists, merge keys, a trailing document marker, comments.
TEST_F(ConfigLoaderTest, AcceptsYamlFormsThatUpstreamAccepts) {
  std::unique_ptr<Config> config = Load(R"(
# comment
domain: forms
descriptors:
  - &first
    key: code
    value: 404
    shadow_mode: yes
    detailed_metric: Off
    rate_limit: &limit
      unit: second
      requests_per_unit: 3
  - key: merged
    rate_limit:
      <<: *limit
      requests_per_unit: 4
  - key: nothing
    value: ~
    descriptors:
  - key: quoted
    value: "a b"
    rate_limit: *limit
---
)");
  const DescriptorNode* code = Node(*config, "forms", {"code_404"});
  ASSERT_NE(code, nullptr);
  EXPECT_TRUE(code->shadow_mode);
  EXPECT_FALSE(code->detailed_metric);
  const DescriptorNode* merged = Node(*config, "forms", {"merged"});
  ASSERT_NE(merged, nullptr);
  ASSERT_EQ(merged->rules.size(), 1u);
  EXPECT_EQ(merged->rules[0].unit, TimeUnit::kSecond);
  EXPECT_EQ(merged->rules[0].requests_per_unit, 4u);  // the map's own key beats the merged one
  const DescriptorNode* nothing = Node(*config, "forms", {"nothing"});
  ASSERT_NE(nothing, nullptr);
  EXPECT_TRUE(nothing->value.empty());
  EXPECT_TRUE(nothing->rules.empty());
  const DescriptorNode* quoted = Node(*config, "forms", {"quoted_a b"});
  ASSERT_NE(quoted, nullptr);
  EXPECT_EQ(quoted->rules[0].requests_per_unit, 3u);
}

// Verifies a file with a domain and no descriptors is a valid, empty domain.
TEST_F(ConfigLoaderTest, LoadsDomainWithoutDescriptors) {
  std::unique_ptr<Config> config = Load("domain: empty\n");
  EXPECT_TRUE(config->HasDomain("empty"));
  EXPECT_EQ(config->RuleCount(), 0u);
  EXPECT_EQ(config->Dump(), "");
}

// Verifies Dump lists every rule once, in declaration order, with the fields an operator needs.
TEST_F(ConfigLoaderTest, DumpListsEveryRule) {
  std::unique_ptr<Config> config = Load(R"(
domain: dump
descriptors:
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: a
    value: x
    shadow_mode: true
    rate_limits:
      - {unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: 2, name: n}
      - {unit: hour, requests_per_unit: 9, unit_multiplier: 2, replaces: [{name: m}]}
  - key: u
    rate_limit: {unlimited: true}
  - key: c
    rate_limit: {algorithm: concurrency, unit: minute, requests_per_unit: 4}
  - key: d
    rate_limit: {algorithm: concurrency, unit: second, requests_per_unit: 2, charge: if_admitted}
)");
  EXPECT_EQ(config->Dump(),
            "dump.b: requests_per_unit=5 unit=minute algorithm=fixed_window key_suffix=fw:60 "
            "shadow_mode=false (test.yaml:3)\n"
            "dump.a_x: requests_per_unit=1 unit=second algorithm=token_bucket burst=2 "
            "key_suffix=tb:1 name=n shadow_mode=true (test.yaml:5)\n"
            "dump.a_x: requests_per_unit=9 unit=hour unit_multiplier=2 algorithm=fixed_window "
            "key_suffix=fw:7200 replaces=m shadow_mode=true (test.yaml:5)\n"
            "dump.u: unlimited shadow_mode=false (test.yaml:11)\n"
            "dump.c: requests_per_unit=4 unit=minute algorithm=concurrency (at most 4 in "
            "flight; a lease not released lapses after one minute; a denied acquisition holds "
            "one until its release) key_suffix=cc:60 shadow_mode=false (test.yaml:13)\n"
            "dump.d: requests_per_unit=2 unit=second algorithm=concurrency (at most 2 in "
            "flight; a lease not released lapses after one second; a denied acquisition holds "
            "none) key_suffix=cc:1 charge=if_admitted shadow_mode=false (test.yaml:15)\n");
}

// Verifies several sources load into one Config, one domain each.
TEST_F(ConfigLoaderTest, LoadsSeveralSources) {
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigSources(
      {{"a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                  "requests_per_unit: 1}\n"},
       {"b.yaml", "domain: b\n"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE((*config)->HasDomain("a"));
  EXPECT_TRUE((*config)->HasDomain("b"));
  EXPECT_EQ((*config)->domains().at("b")->file, "b.yaml");
  EXPECT_EQ((*config)->RuleCount(), 1u);
}

// ---- Errors: the file as a whole.

// Verifies a YAML syntax error names the file and the line yaml-cpp reports.
TEST_F(ConfigLoaderTest, RejectsYamlSyntaxError) {
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors: [{key: a
)"),
            "test.yaml:3: YAML syntax error: end of map flow not found (column 1)");
  EXPECT_EQ(LoadError(R"(
domain: a
 descriptors: []
)"),
            "test.yaml:2: YAML syntax error: illegal map value (column 13)");
}

// Verifies an empty file, or one holding only comments, is refused.
TEST_F(ConfigLoaderTest, RejectsEmptyFile) {
  const std::string expected =
      "test.yaml:1: file is empty (expected a map with 'domain' and 'descriptors')";
  EXPECT_EQ(LoadError(""), expected);
  EXPECT_EQ(LoadError("# nothing here\n"), expected);
  EXPECT_EQ(LoadError("~\n"), expected);
}

// Verifies a file whose top level is not a map is refused.
TEST_F(ConfigLoaderTest, RejectsTopLevelThatIsNotMap) {
  EXPECT_EQ(LoadError("- domain: a\n"),
            "test.yaml:1: expected a map with 'domain' and 'descriptors' at the top of the "
            "file, got a list");
  EXPECT_EQ(LoadError("# comment\n\njust text\n"),
            "test.yaml:3: expected a map with 'domain' and 'descriptors' at the top of the "
            "file, got 'just text'");
}

// Verifies a file is read as its first YAML document, as upstream's yaml.v2 Unmarshal reads
// it, with a warning naming the line where the rest (not even parsed) starts; --strict_config
// refuses the second document.
TEST_F(ConfigLoaderTest, ReadsTheFirstDocumentOnlyWithAWarning) {
  std::unique_ptr<Config> config = Load("domain: a\n---\ndomain: b\n");
  EXPECT_TRUE(config->HasDomain("a"));
  EXPECT_FALSE(config->HasDomain("b"));
  EXPECT_THAT(config->warnings(),
              ::testing::ElementsAre(
                  "test.yaml:3: ignored from here to the end of the file: a second YAML "
                  "document, which envoyproxy/ratelimit does not read either (one file holds "
                  "one domain; --strict_config refuses it)"));
  EXPECT_EQ(LoadError("domain: a\n---\ndomain: [b\n"), "");
  EXPECT_EQ(StrictLoadError("domain: a\n---\ndomain: b\n"),
            "test.yaml:3: more than one YAML document in the file (one file holds one domain)");
}

// Verifies input on which yaml-cpp 0.7's LoadAll never returns (a document starting with ',',
// found by fuzz/config_fuzz.cc) is an error like any other. Before the fix this test hung,
// allocating without end.
TEST_F(ConfigLoaderTest, StrayCommaIsAnErrorNotAHang) {
  EXPECT_THAT(LoadError(","), ::testing::StartsWith("test.yaml:1: "));
  EXPECT_THAT(LoadError(",domain: depth\ndescriptors:\n  - key: tier\n"),
              ::testing::StartsWith("test.yaml:1: "));
  EXPECT_EQ(LoadError("domain: a\n---\n,\n---\ndomain: b\n"),
            "test.yaml:3: YAML syntax error: the parser cannot get past this point (a stray "
            "','?)");
}

// ---- Errors: domain.

// Verifies a missing, empty or non-string domain is refused.
TEST_F(ConfigLoaderTest, RejectsMissingOrEmptyDomain) {
  EXPECT_EQ(LoadError("descriptors: []\n"),
            "test.yaml:1: domain: missing (every file needs a non-empty domain)");
  EXPECT_EQ(LoadError("# comment\ndomain: \"\"\n"), "test.yaml:2: domain: must not be empty");
  EXPECT_EQ(LoadError("domain:\n"), "test.yaml:1: domain: must not be empty");
  EXPECT_EQ(LoadError("domain: [a]\n"), "test.yaml:1: domain: expected a string, got a list");
}

// Verifies two files with one domain are refused, naming both files.
TEST_F(ConfigLoaderTest, RejectsDuplicateDomainAcrossFiles) {
  absl::StatusOr<std::unique_ptr<Config>> config =
      LoadConfigSources({{"a.yaml", "domain: x\n"}, {"b.yaml", "# b\ndomain: x\n"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(),
            "b.yaml:2: domain: duplicate domain 'x' (first defined in a.yaml; "
            "--merge_domain_config merges files of one domain)");
}

// ---- envoyproxy/ratelimit's newer descriptor keys.

// Verifies quota_mode, value_to_metric, share_threshold and metadata are read onto the node.
TEST_F(ConfigLoaderTest, ReadsUpstreamDescriptorFlags) {
  std::unique_ptr<Config> config = Load(R"(
domain: up
descriptors:
  - key: files
    value: "docs/*"
    share_threshold: true
    quota_mode: yes
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: route
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 5}
)");
  const Domain& domain = *config->domains().at("up");
  ASSERT_EQ(domain.root.wildcard_children.size(), 1u);
  const DescriptorNode& files = *domain.root.wildcard_children[0];
  EXPECT_TRUE(files.share_threshold);
  EXPECT_TRUE(files.quota_mode);
  EXPECT_FALSE(files.value_to_metric);
  const DescriptorNode* route = Node(*config, "up", {"route"});
  ASSERT_NE(route, nullptr);
  EXPECT_TRUE(route->value_to_metric);
  EXPECT_FALSE(route->share_threshold);
  EXPECT_FALSE(route->quota_mode);
  EXPECT_EQ(route->metadata, nullptr);
}

// Verifies share_threshold is refused on a value without a wildcard, as upstream refuses it.
TEST_F(ConfigLoaderTest, RejectsShareThresholdWithoutWildcard) {
  EXPECT_EQ(LoadError(R"(
domain: up
descriptors:
  - key: files
    value: docs
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
)"),
            "test.yaml:5: descriptors[0].share_threshold: only a wildcard (a key or value "
            "containing '*') can share its threshold, but neither key 'files' nor value 'docs' "
            "holds one");
  EXPECT_EQ(LoadError(R"(
domain: up
descriptors:
  - key: files
    share_threshold: true
)"),
            "test.yaml:4: descriptors[0].share_threshold: only a wildcard (a key or value "
            "containing '*') can share its threshold, but neither key 'files' nor value '' "
            "holds one");
  EXPECT_EQ(LoadError("domain: up\ndescriptors:\n  - key: f\n    value: a*\n"
                      "    share_threshold: false\n"),
            "");
}

// Verifies what envoyproxy/ratelimit accepts leniently loads here too, with a warning: a rule
// without requests_per_unit is a limit of 0, and an unlimited rule ignores its number.
TEST_F(ConfigLoaderTest, AcceptsUpstreamLenientRules) {
  std::unique_ptr<Config> config = Load(R"(
domain: up
descriptors:
  - key: blocked
    rate_limit:
      unit: hour
  - key: free
    rate_limit:
      unlimited: true
      requests_per_unit: 25
)");
  const DescriptorNode* blocked = Node(*config, "up", {"blocked"});
  ASSERT_NE(blocked, nullptr);
  ASSERT_EQ(blocked->rules.size(), 1u);
  EXPECT_EQ(blocked->rules[0].requests_per_unit, 0u);
  EXPECT_EQ(blocked->rules[0].params.limit, 0u);
  EXPECT_EQ(blocked->rules[0].unit, TimeUnit::kHour);
  const DescriptorNode* free = Node(*config, "up", {"free"});
  ASSERT_NE(free, nullptr);
  EXPECT_TRUE(free->rules[0].unlimited);
  EXPECT_THAT(config->warnings(),
              ::testing::ElementsAre(
                  "test.yaml:4: descriptors[0].rate_limit.requests_per_unit: missing: the limit "
                  "is 0, so every request with hits is OVER_LIMIT",
                  "test.yaml:9: descriptors[1].rate_limit.requests_per_unit: ignored: the rule "
                  "is unlimited (remove requests_per_unit or unlimited)"));
  // A clean file has no warnings.
  EXPECT_TRUE(Load("domain: up\n")->warnings().empty());
}

// Verifies files of one domain merge when asked (MERGE_DOMAIN_CONFIG), and that a descriptor
// defined in both is still refused, naming both places.
TEST_F(ConfigLoaderTest, MergesDomainAcrossFilesWhenAsked) {
  ConfigLoadOptions merge;
  merge.merge_domains = true;
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigSources(
      {{"a.yaml", "domain: x\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
                  "requests_per_unit: 1}\n"},
       {"b.yaml", "domain: x\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, "
                  "requests_per_unit: 2}\n  - key: w\n    value: 'p*'\n"}},
      merge);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->domains().size(), 1u);
  EXPECT_EQ((*config)->RuleCount(), 2u);
  const DescriptorEntryView b[] = {{"b", "1"}};
  const DescriptorNode* node = (*config)->Match("x", b);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->rules[0].requests_per_unit, 2u);
  EXPECT_EQ(node->file, "b.yaml");

  config = LoadConfigSources({{"a.yaml", "domain: x\ndescriptors:\n  - key: a\n"},
                              {"b.yaml", "domain: x\ndescriptors:\n  - key: c\n  - key: a\n"}},
                             merge);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "b.yaml:4: duplicate descriptor: key 'a' of domain 'x' is already defined at "
            "a.yaml:3");
}

// ---- failure_mode (per domain) and local_share (per rule).

// Verifies a domain's failure_mode is read with where it was set, and is unset (the flag
// decides) when the file does not give one.
TEST_F(ConfigLoaderTest, ReadsDomainFailureMode) {
  for (FailureMode mode : {FailureMode::kAllow, FailureMode::kDeny, FailureMode::kLocal}) {
    std::unique_ptr<Config> config =
        Load(absl::StrCat("domain: a\nfailure_mode: ", FailureModeName(mode), "\n"));
    const Domain* domain = config->FindDomain("a");
    ASSERT_NE(domain, nullptr);
    EXPECT_EQ(domain->failure_mode, mode);
    EXPECT_EQ(domain->failure_mode_at, "test.yaml:2");
  }
  std::unique_ptr<Config> unset = Load("domain: a\n");
  ASSERT_NE(unset->FindDomain("a"), nullptr);
  EXPECT_FALSE(unset->FindDomain("a")->failure_mode.has_value());
  EXPECT_EQ(unset->FindDomain("b"), nullptr);
}

// Verifies a failure_mode other than allow, deny or local is refused with file, line and field.
TEST_F(ConfigLoaderTest, RejectsBadFailureMode) {
  EXPECT_EQ(LoadError("domain: a\nfailure_mode: open\n"),
            "test.yaml:2: failure_mode: invalid failure mode 'open' (expected allow, deny or "
            "local)");
  EXPECT_EQ(LoadError("domain: a\ndescriptors: []\nfailure_mode: Local\n"),
            "test.yaml:3: failure_mode: invalid failure mode 'Local' (expected allow, deny or "
            "local)");
  EXPECT_EQ(LoadError("domain: a\nfailure_mode:\n"),
            "test.yaml:2: failure_mode: invalid failure mode '' (expected allow, deny or local)");
  EXPECT_EQ(LoadError("domain: a\nfailure_mode: [local]\n"),
            "test.yaml:2: failure_mode: expected a string, got a list");
}

// Verifies files of one merged domain may set failure_mode once, or alike, but not differently.
TEST_F(ConfigLoaderTest, MergedDomainTakesOneFailureMode) {
  ConfigLoadOptions merge;
  merge.merge_domains = true;
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigSources(
      {{"a.yaml", "domain: x\n"}, {"b.yaml", "domain: x\nfailure_mode: local\n"}}, merge);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->FindDomain("x")->failure_mode, FailureMode::kLocal);
  EXPECT_EQ((*config)->FindDomain("x")->failure_mode_at, "b.yaml:2");

  config = LoadConfigSources({{"a.yaml", "domain: x\nfailure_mode: deny\n"},
                              {"b.yaml", "domain: x\nfailure_mode: deny\n"}},
                             merge);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->FindDomain("x")->failure_mode, FailureMode::kDeny);

  config = LoadConfigSources({{"a.yaml", "domain: x\nfailure_mode: deny\n"},
                              {"b.yaml", "# b\ndomain: x\nfailure_mode: local\n"}},
                             merge);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "b.yaml:3: failure_mode: 'local' conflicts with 'deny' of domain 'x' at a.yaml:2");
}

// Verifies local_share is read onto the rule, and is unset when not given.
TEST_F(ConfigLoaderTest, ReadsLocalShare) {
  std::unique_ptr<Config> config = Load(R"(
domain: a
descriptors:
  - key: half
    rate_limit: {unit: minute, requests_per_unit: 30, local_share: 0.5}
  - key: whole
    rate_limit: {unit: minute, requests_per_unit: 30, local_share: 1}
  - key: tiny
    rate_limit: {unit: minute, requests_per_unit: 30, local_share: 1e-3}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 30}
)");
  EXPECT_EQ(Node(*config, "a", {"half"})->rules[0].local_share, 0.5);
  EXPECT_EQ(Node(*config, "a", {"whole"})->rules[0].local_share, 1.0);
  EXPECT_EQ(Node(*config, "a", {"tiny"})->rules[0].local_share, 0.001);
  EXPECT_FALSE(Node(*config, "a", {"plain"})->rules[0].local_share.has_value());
  // The limit itself is untouched: local_share applies only when the backend cannot decide.
  EXPECT_EQ(Node(*config, "a", {"half"})->rules[0].params.limit, 30u);
}

// Verifies `charge`: always or if_admitted in any case, unset leaving it to --default_charge; a
// bad value, or one on an unlimited rule, names file, line and field.
TEST_F(ConfigLoaderTest, ReadsCharge) {
  std::unique_ptr<Config> config = Load(R"(
domain: a
descriptors:
  - key: budget
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 1000, burst: 1000,
                 charge: always}
  - key: strict
    rate_limit: {unit: minute, requests_per_unit: 30, charge: IF_ADMITTED}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 30}
)");
  EXPECT_EQ(Node(*config, "a", {"budget"})->rules[0].charge, Charge::kAlways);
  EXPECT_EQ(Node(*config, "a", {"strict"})->rules[0].charge, Charge::kIfAdmitted);
  EXPECT_FALSE(Node(*config, "a", {"plain"})->rules[0].charge.has_value());
  EXPECT_THAT(config->Dump(), HasSubstr("key_suffix=tb:60 charge=always"));
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
                      "      requests_per_unit: 5\n      charge: sometimes\n"),
            "test.yaml:7: descriptors[0].rate_limit.charge: invalid charge 'sometimes' (expected "
            "if_admitted: a denied request consumes nothing, or always: every hit asked is "
            "charged, past the limit)");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n"
                      "      unlimited: true\n      charge: always\n"),
            "test.yaml:6: descriptors[0].rate_limit.charge: must not be set when unlimited is "
            "true");
}

// Verifies local_share must be a plain number more than 0 and at most 1.
TEST_F(ConfigLoaderTest, RejectsBadLocalShare) {
  auto error = [](absl::string_view share) {
    return LoadError(absl::StrCat(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
        "      requests_per_unit: 5\n      local_share: ",
        share, "\n"));
  };
  auto expected = [](absl::string_view got) {
    return absl::StrCat("test.yaml:7: descriptors[0].rate_limit.local_share: expected a number "
                        "more than 0 and at most 1, got ",
                        got);
  };
  EXPECT_EQ(error("half"), expected("'half'"));
  EXPECT_EQ(error("'0.5'"), expected("the quoted string '0.5'"));
  EXPECT_EQ(error("[0.5]"), expected("a list"));
  EXPECT_EQ(error(""), expected("nothing"));
  EXPECT_EQ(error(".nan"), expected("'.nan'"));
  EXPECT_EQ(error("0x1p-1"), expected("'0x1p-1'"));
  auto out_of_range = [](absl::string_view share) {
    return absl::StrCat("test.yaml:7: descriptors[0].rate_limit.local_share: ", share,
                        " is out of range (more than 0 and at most 1: the fraction of the limit "
                        "one replica admits on its own)");
  };
  EXPECT_EQ(error("0"), out_of_range("0"));
  EXPECT_EQ(error("-0.5"), out_of_range("-0.5"));
  EXPECT_EQ(error("1.5"), out_of_range("1.5"));
  EXPECT_EQ(error("2"), out_of_range("2"));
  EXPECT_EQ(error("0.25"), "");
  EXPECT_EQ(error("1.0"), "");
}

// Verifies Dump shows a domain's failure_mode and a rule's local_share when they are set.
TEST_F(ConfigLoaderTest, DumpShowsFailureModeAndLocalShare) {
  std::unique_ptr<Config> config = Load(R"(
domain: fm
failure_mode: local
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 30, local_share: 0.5}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5}
)");
  EXPECT_EQ(config->Dump(),
            "fm: failure_mode=local (test.yaml:2)\n"
            "fm.a: requests_per_unit=30 unit=minute algorithm=fixed_window key_suffix=fw:60 "
            "local_share=0.5 shadow_mode=false (test.yaml:4)\n"
            "fm.b: requests_per_unit=5 unit=minute algorithm=fixed_window key_suffix=fw:60 "
            "shadow_mode=false (test.yaml:6)\n");
}

// ---- Errors: keys of maps.

// Verifies an unknown key is refused at every level, with its path and the keys allowed there.
TEST_F(ConfigLoaderTest, RejectsUnknownKeys) {
  EXPECT_EQ(LoadError("domain: a\nversion: 2\n"),
            "test.yaml:2: version: unknown key (expected domain, descriptors, failure_mode)");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    limit: 5
)"),
            "test.yaml:4: descriptors[0].limit: unknown key (expected key, value, rate_limit, "
            "rate_limits, shadow_mode, quota_mode, detailed_metric, value_to_metric, "
            "share_threshold, metadata, descriptors)");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 5
      per: second
)"),
            "test.yaml:7: descriptors[0].rate_limit.per: unknown key (expected unit, "
            "requests_per_unit, unlimited, name, replaces, algorithm, burst, unit_multiplier, "
            "hash_tag, local_share, charge)");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 5
      replaces:
        - name: x
          why: because
)"),
            "test.yaml:9: descriptors[0].rate_limit.replaces[0].why: unknown key (expected "
            "name)");
}

// ---- What envoyproxy/ratelimit loads leniently (config_impl.go: validateYamlKeys lets any of
// its keys through anywhere, then yaml.v2's non-strict Unmarshal drops one with no field where
// it stands, keeps the last of a repeated key and reads a null as the zero value): loaded with
// a warning naming file, line and key, refused under --strict_config.

// Loads `text` as test.yaml with --strict_config; returns the error message, or "" if it
// loaded.
std::string StrictLoadError(absl::string_view text) {
  ConfigLoadOptions strict;
  strict.strict = true;
  absl::StatusOr<std::unique_ptr<Config>> config =
      LoadConfigSources({{"test.yaml", Yaml(text)}}, strict);
  return config.ok() ? "" : std::string(config.status().message());
}

// Upstream's keys each where it has no field: under rate_limit, on a descriptor, at the top,
// in a replaces entry; metadata out of place is not looked into, as upstream does not.
constexpr absl::string_view kMisplacedKeys = R"(
domain: up
key: stray
metadata: {anything: [1.5, {x: 2}]}
descriptors:
  - key: client
    unit: minute
    domain: other
    rate_limit:
      unit: second
      requests_per_unit: 5
      shadow_mode: true
      replaces:
        - name: old
          unit: hour
      descriptors:
        - key: nested
          rate_limit: {unit: day, requests_per_unit: 1}
)";

// Verifies each of upstream's keys out of place loads, ignored as upstream ignores it (the
// shadow_mode under rate_limit does not make the rule a shadow one), with one warning each
// naming the file, the line and the key's path.
TEST_F(ConfigLoaderTest, IgnoresUpstreamKeysOutOfPlaceWithAWarning) {
  std::unique_ptr<Config> config = Load(kMisplacedKeys);
  EXPECT_EQ(config->Dump(),
            "up.client: requests_per_unit=5 unit=second algorithm=fixed_window key_suffix=fw:1 "
            "replaces=old shadow_mode=false (test.yaml:5)\n");
  EXPECT_THAT(
      config->warnings(),
      ::testing::ElementsAre(
          "test.yaml:2: key: ignored: not a key of the top level (key belongs on a "
          "descriptor), as envoyproxy/ratelimit ignores it here (--strict_config refuses it)",
          "test.yaml:3: metadata: ignored: not a key of the top level (metadata belongs on a "
          "descriptor), as envoyproxy/ratelimit ignores it here (--strict_config refuses it)",
          "test.yaml:6: descriptors[0].unit: ignored: not a key of a descriptor (unit belongs "
          "in a rate_limit), as envoyproxy/ratelimit ignores it here (--strict_config refuses "
          "it)",
          "test.yaml:7: descriptors[0].domain: ignored: not a key of a descriptor (domain "
          "belongs at the top level), as envoyproxy/ratelimit ignores it here (--strict_config "
          "refuses it)",
          "test.yaml:11: descriptors[0].rate_limit.shadow_mode: ignored: not a key of a rate "
          "limit (shadow_mode belongs on a descriptor), as envoyproxy/ratelimit ignores it here "
          "(--strict_config refuses it)",
          "test.yaml:15: descriptors[0].rate_limit.descriptors: ignored: not a key of a rate "
          "limit (descriptors belongs at the top level or on a descriptor), as "
          "envoyproxy/ratelimit ignores it here (--strict_config refuses it)",
          "test.yaml:14: descriptors[0].rate_limit.replaces[0].unit: ignored: not a key of a "
          "replaces entry (unit belongs in a rate_limit), as envoyproxy/ratelimit ignores it "
          "here (--strict_config refuses it)"));
}

// Verifies --strict_config refuses the same file at its first key out of place, as before.
TEST_F(ConfigLoaderTest, StrictConfigRefusesUpstreamKeysOutOfPlace) {
  EXPECT_EQ(StrictLoadError(kMisplacedKeys),
            "test.yaml:2: key: not a key of the top level (key belongs on a descriptor); "
            "envoyproxy/ratelimit ignores it here, --strict_config refuses it");
  EXPECT_EQ(StrictLoadError(R"(
domain: up
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 5
      shadow_mode: true
)"),
            "test.yaml:7: descriptors[0].rate_limit.shadow_mode: not a key of a rate limit "
            "(shadow_mode belongs on a descriptor); envoyproxy/ratelimit ignores it here, "
            "--strict_config refuses it");
}

// Verifies what upstream refuses is still refused, lenient or not: a key that is nobody's, one
// of Sluice's own keys out of place (upstream knows none of them), and, inside a value that is
// ignored, what upstream's validateYamlKeys refuses there: a key not its own, a float, an
// integer beyond 64 bits, a list of anything but maps.
TEST_F(ConfigLoaderTest, RefusesWhatUpstreamRefusesEvenWhereItIgnores) {
  const std::string descriptor = "domain: up\ndescriptors:\n  - key: k\n";
  EXPECT_EQ(LoadError(descriptor + "    limit: 5\n"),
            "test.yaml:4: descriptors[0].limit: unknown key (expected key, value, rate_limit, "
            "rate_limits, shadow_mode, quota_mode, detailed_metric, value_to_metric, "
            "share_threshold, metadata, descriptors)");
  EXPECT_THAT(LoadError(descriptor + "    algorithm: gcra\n"),
              HasSubstr("test.yaml:4: descriptors[0].algorithm: unknown key (expected key,"));
  EXPECT_EQ(LoadError(descriptor + "    unit: {bogus: 1}\n"),
            "test.yaml:4: descriptors[0].unit.bogus: unknown key (envoyproxy/ratelimit refuses "
            "it even where it ignores it)");
  EXPECT_EQ(LoadError(descriptor + "    requests_per_unit: 1.5\n"),
            "test.yaml:4: descriptors[0].requests_per_unit: '1.5' is a float or an integer "
            "beyond 64 bits (envoyproxy/ratelimit refuses it even where it ignores it)");
  EXPECT_THAT(LoadError(descriptor + "    name: 18446744073709551615\n"),
              HasSubstr("is a float or an integer beyond 64 bits"));
  EXPECT_THAT(LoadError(descriptor + "    name: .inf\n"), HasSubstr("is a float"));
  EXPECT_THAT(LoadError(descriptor + "    name: 1e3\n"), HasSubstr("is a float"));
  EXPECT_THAT(LoadError(descriptor + "    name: 09\n"), HasSubstr("is a float"));  // not octal
  EXPECT_THAT(LoadError(descriptor + "    name: -9223372036854775809\n"),
              HasSubstr("is a float"));
  EXPECT_EQ(LoadError(descriptor + "    replaces: [x]\n"),
            "test.yaml:4: descriptors[0].replaces[0]: a list holding 'x' (envoyproxy/ratelimit "
            "refuses it even where it ignores it)");
  EXPECT_EQ(LoadError(descriptor + "    domain: {descriptors: [{key: a, rate_limits: []}]}\n"),
            "test.yaml:4: descriptors[0].domain.descriptors[0].rate_limits: unknown key "
            "(envoyproxy/ratelimit refuses it even where it ignores it)");
  // A value that contains itself (yaml.v2: "anchor value contains itself"), at its alias,
  // before a walk that would not end.
  EXPECT_EQ(LoadError(descriptor + "    unit: &a [{descriptors: *a}, {descriptors: *a}]\n"),
            "test.yaml:4: descriptors[0].unit[0].descriptors: contains itself (an alias of a "
            "node it is inside)");
  // What upstream's switch takes as int, string, bool or null passes.
  for (const char* value :
       {"9223372036854775807", "-9223372036854775808", "0x10", "-0b1", "017", "1_000", "'1.5'",
        "yes", "~", "1.2.3",
        "2024-01-01", "v1.2", "{metadata: {x: 1.5}}", "[{name: a}]"}) {
    EXPECT_EQ(LoadError(descriptor + "    name: " + value + "\n"), "") << value;
  }
}

// Verifies a string field holding what yaml.v2 reads as a float or an integer beyond int64 is
// refused with its file, line and field, and told to quote it, as envoyproxy/ratelimit refuses
// the file (validateYamlKeys: "error checking config"); quoted, the same text loads, and so do
// the integers, booleans and other text upstream takes.
TEST_F(ConfigLoaderTest, RefusesNumbersUpstreamRefusesInStringFields) {
  const std::string head = "domain: up\ndescriptors:\n  - key: k\n";
  const std::string rule = "    rate_limit: {unit: minute, requests_per_unit: 1}\n";
  EXPECT_EQ(LoadError(head + "    value: 1.5\n" + rule),
            "test.yaml:4: descriptors[0].value: expected a string, got 1.5, a float or an "
            "integer beyond 64 bits, which envoyproxy/ratelimit refuses; quote it: \"1.5\"");
  EXPECT_THAT(LoadError(head + "    value: 99999999999999999999\n" + rule),
              HasSubstr("test.yaml:4: descriptors[0].value: expected a string, got "
                        "99999999999999999999"));
  EXPECT_THAT(LoadError(head + "    rate_limit: {name: 0.5, unit: minute, requests_per_unit: 1}\n"),
              HasSubstr("test.yaml:4: descriptors[0].rate_limit.name: expected a string, got 0.5"));
  EXPECT_THAT(LoadError("domain: 1e3\n"), HasSubstr("test.yaml:1: domain: expected a string"));
  EXPECT_THAT(LoadError("domain: up\ndescriptors:\n  - key: .inf\n" + rule),
              HasSubstr("descriptors[0].key: expected a string, got .inf"));
  for (const char* value : {"'1.5'", "\"99999999999999999999\"", "404", "0x1F", "017", "1_000",
                            "9223372036854775807", "yes", "v1.5", "2024-01-31", "1.2.3"}) {
    EXPECT_EQ(LoadError(head + "    value: " + value + "\n" + rule), "") << value;
  }
}

// Verifies a key given twice in one map loads with the last one given, as yaml.v2 reads it,
// with a warning naming both lines; --strict_config refuses it.
TEST_F(ConfigLoaderTest, TakesTheLastOfARepeatedKey) {
  constexpr absl::string_view kRepeated = R"(
domain: a
descriptors:
  - key: k
    value: v
    value: w
    rate_limit: {unit: second, requests_per_unit: 1, requests_per_unit: 2}
)";
  std::unique_ptr<Config> config = Load(kRepeated);
  EXPECT_NE(Node(*config, "a", {"k_w"}), nullptr);
  EXPECT_EQ(Node(*config, "a", {"k_w"})->rules[0].requests_per_unit, 2u);
  EXPECT_THAT(config->warnings(),
              ::testing::ElementsAre(
                  "test.yaml:5: descriptors[0].value: given twice (also at line 4): this one is "
                  "used, as envoyproxy/ratelimit reads it (--strict_config refuses it)",
                  "test.yaml:6: descriptors[0].rate_limit.requests_per_unit: given twice (also "
                  "at line 6): this one is used, as envoyproxy/ratelimit reads it "
                  "(--strict_config refuses it)"));
  EXPECT_EQ(StrictLoadError(kRepeated),
            "test.yaml:5: descriptors[0].value: duplicate key (first given at line 4)");
}

// Verifies an empty value where upstream's struct has a boolean or a number reads as false or
// 0, and an empty rate_limit as none, each with a warning; --strict_config refuses them.
TEST_F(ConfigLoaderTest, ReadsEmptyUpstreamFieldsAsUpstreamDoes) {
  constexpr absl::string_view kEmpty = R"(
domain: a
descriptors:
  - key: k
    shadow_mode:
    rate_limit:
      unit: second
      requests_per_unit:
  - key: none
    rate_limit:
)";
  std::unique_ptr<Config> config = Load(kEmpty);
  const DescriptorNode* k = Node(*config, "a", {"k"});
  ASSERT_NE(k, nullptr);
  EXPECT_FALSE(k->shadow_mode);
  EXPECT_EQ(k->rules[0].requests_per_unit, 0u);
  const DescriptorNode* none = Node(*config, "a", {"none"});
  ASSERT_NE(none, nullptr);
  EXPECT_TRUE(none->rules.empty());
  EXPECT_THAT(
      config->warnings(),
      ::testing::ElementsAre(
          "test.yaml:4: descriptors[0].shadow_mode: empty: read as false, as "
          "envoyproxy/ratelimit reads it (--strict_config refuses it)",
          "test.yaml:7: descriptors[0].rate_limit.requests_per_unit: empty: read as 0, as "
          "envoyproxy/ratelimit reads it (--strict_config refuses it)",
          "test.yaml:9: descriptors[1].rate_limit: empty: the descriptor has no rate limit, as "
          "envoyproxy/ratelimit reads it (--strict_config refuses it)"));
  EXPECT_EQ(StrictLoadError(kEmpty),
            "test.yaml:4: descriptors[0].shadow_mode: expected true or false, got nothing");
}

// Verifies a map key that is not a string is refused.
TEST_F(ConfigLoaderTest, RejectsNonStringMapKey) {
  EXPECT_EQ(LoadError("domain: a\n? [x]\n: 1\n"),
            "test.yaml:2: map keys must be strings, got a list");
}

// Verifies a merge key must merge maps.
TEST_F(ConfigLoaderTest, RejectsBadMergeKey) {
  EXPECT_EQ(LoadError("domain: a\n<<: 5\n"),
            "test.yaml:2: <<: expected a map or a list of maps, got '5'");
}

// ---- Errors: descriptors.

// Verifies descriptors must be a list of maps.
TEST_F(ConfigLoaderTest, RejectsDescriptorsThatAreNotListOfMaps) {
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  key: k\n"),
            "test.yaml:2: descriptors: expected a list of descriptors, got a map");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n  - k2\n"),
            "test.yaml:4: descriptors[1]: expected a map with 'key', got 'k2'");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    descriptors: k2
)"),
            "test.yaml:4: descriptors[0].descriptors: expected a list of descriptors, got 'k2'");
}

// Verifies a descriptor needs a non-empty string key.
TEST_F(ConfigLoaderTest, RejectsMissingOrEmptyKey) {
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - value: v\n"),
            "test.yaml:3: descriptors[0].key: missing (every descriptor needs a key)");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: ''\n"),
            "test.yaml:3: descriptors[0].key: must not be empty");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: {a: b}\n"),
            "test.yaml:3: descriptors[0].key: expected a string, got a map");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    value: [v]\n"),
            "test.yaml:4: descriptors[0].value: expected a string, got a list");
}

// Verifies two descriptors with the same key and value under one parent are refused, naming
// both lines, for exact, default and wildcard values, at any depth.
TEST_F(ConfigLoaderTest, RejectsDuplicateDescriptors) {
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: database
    value: users
  - key: database
    value: users
)"),
            "test.yaml:5: descriptors[1]: duplicate descriptor: key 'database' value 'users' "
            "is already defined at line 3");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: to_number
  - key: to_number
    value: ""
)"),
            "test.yaml:4: descriptors[1]: duplicate descriptor: key 'to_number' without a "
            "value is already defined at line 3");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: service
    descriptors:
      - key: path
        value: /v1/*
      - key: path
        value: /v2/*
      - key: path
        value: /v1/*
)"),
            "test.yaml:9: descriptors[0].descriptors[2]: duplicate descriptor: key 'path' "
            "value '/v1/*' is already defined at line 5");
}

// Verifies the same key and value under different parents is not a duplicate.
TEST_F(ConfigLoaderTest, AcceptsSameDescriptorUnderDifferentParents) {
  std::unique_ptr<Config> config = Load(R"(
domain: a
descriptors:
  - key: p
    value: "1"
    descriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]
  - key: p
    value: "2"
    descriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 2}}]
  - key: k
    rate_limit: {unit: second, requests_per_unit: 3}
)");
  EXPECT_EQ(config->RuleCount(), 3u);
}

// Verifies two descriptors whose "key_value" names coincide are refused, as upstream does.
TEST_F(ConfigLoaderTest, RejectsCompositeKeyCollision) {
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: a_b
    value: c
  - key: a
    value: b_c
)"),
            "test.yaml:5: descriptors[1]: descriptor key 'a' value 'b_c' has the same "
            "composite key 'a_b_c' as key 'a_b' value 'c' at line 3");
  // Wildcards too: upstream keys each descriptor by "key[_value]" whichever holds the '*'.
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: a
    value: "*"
  - key: a_*
)"),
            "test.yaml:5: descriptors[1]: descriptor key 'a_*' value '' has the same "
            "composite key 'a_*' as key 'a' value '*' at line 3");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: a*\n  - key: a*\n"),
            "test.yaml:4: descriptors[1]: duplicate descriptor: key 'a*' is already defined at "
            "line 3");
}

// Verifies a key with '*' makes a wildcard descriptor, with or without a value, which may share
// its threshold (upstream checks the "key_value" for a '*').
TEST_F(ConfigLoaderTest, ReadsKeyWildcards) {
  std::unique_ptr<Config> config = Load(R"(
domain: kw
descriptors:
  - key: user_*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: "*_id"
    value: v*
    rate_limit: {unit: minute, requests_per_unit: 2}
)");
  const Domain& domain = *config->domains().at("kw");
  EXPECT_TRUE(domain.root.default_children.empty());
  ASSERT_EQ(domain.root.wildcard_children.size(), 2u);
  const DescriptorNode& user = *domain.root.wildcard_children[0];
  EXPECT_TRUE(user.key_wildcard);
  EXPECT_TRUE(user.share_threshold);
  EXPECT_EQ(user.composite_pattern, "user_*");
  EXPECT_EQ(user.full_key, "kw.user_*");
  const DescriptorNode& id = *domain.root.wildcard_children[1];
  EXPECT_EQ(id.composite_pattern, "*_id_v*");
  EXPECT_EQ(id.full_key, "kw.*_id_v*");
}

// Verifies recursion through a self-referencing alias stops with an error.
TEST_F(ConfigLoaderTest, RejectsDescriptorsNestedTooDeeply) {
  EXPECT_THAT(LoadError("domain: a\ndescriptors: &d\n  - key: k\n    descriptors: *d\n"),
              HasSubstr("descriptors nested more than 64 levels deep"));
}

// Verifies shadow_mode and detailed_metric must be booleans.
TEST_F(ConfigLoaderTest, RejectsNonBooleanFlags) {
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n"),
            "test.yaml:4: descriptors[0].shadow_mode: expected true or false, got 'maybe'");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    detailed_metric: \"true\"\n"),
            "test.yaml:4: descriptors[0].detailed_metric: expected true or false, got the "
            "quoted string 'true'");
  // Empty: false with a warning (ReadsEmptyUpstreamFieldsAsUpstreamDoes), or refused.
  EXPECT_EQ(StrictLoadError("domain: a\ndescriptors:\n  - key: k\n    shadow_mode:\n"),
            "test.yaml:4: descriptors[0].shadow_mode: expected true or false, got nothing");
}

// ---- Errors: rate_limit and rate_limits.

// Verifies rate_limit and rate_limits on one descriptor are refused.
TEST_F(ConfigLoaderTest, RejectsRateLimitAndRateLimitsTogether) {
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
    rate_limits: [{unit: minute, requests_per_unit: 10}]
)"),
            "test.yaml:5: descriptors[0]: rate_limit and rate_limits are mutually exclusive "
            "(put every rule in rate_limits)");
}

// Verifies rate_limits must be a non-empty list of maps.
TEST_F(ConfigLoaderTest, RejectsBadRateLimitsList) {
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limits: []\n"),
            "test.yaml:4: descriptors[0].rate_limits: expected a non-empty list of rate "
            "limits, got an empty list");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limits: {unit: day}\n"),
            "test.yaml:4: descriptors[0].rate_limits: expected a non-empty list of rate "
            "limits, got a map");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - 5\n"),
            "test.yaml:5: descriptors[0].rate_limits[0]: expected a map, got '5'");
}

// Verifies rate_limit must be a map.
TEST_F(ConfigLoaderTest, RejectsRateLimitThatIsNotMap) {
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit: 5/second\n"),
            "test.yaml:4: descriptors[0].rate_limit: expected a map, got '5/second'");
  // Empty: no rule with a warning (ReadsEmptyUpstreamFieldsAsUpstreamDoes), or refused.
  EXPECT_EQ(StrictLoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n"),
            "test.yaml:4: descriptors[0].rate_limit: expected a map, got nothing");
}

// Verifies two rules of one algorithm and period on one node are refused, even when the period
// is written differently (60 seconds and 1 minute), since they would share one counter.
TEST_F(ConfigLoaderTest, RejectsRulesWithSameAlgorithmAndPeriod) {
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limits:
      - unit: second
        requests_per_unit: 100
        unit_multiplier: 60
      - unit: day
        requests_per_unit: 1000
      - unit: minute
        requests_per_unit: 10
)"),
            "test.yaml:10: descriptors[0].rate_limits[2]: same algorithm (fixed_window) and "
            "period (60s) as descriptors[0].rate_limits[0] at line 5; two such rules would "
            "share one counter");
  // Same period, different algorithms: fine.
  std::unique_ptr<Config> config = Load(R"(
domain: a
descriptors:
  - key: k
    rate_limits:
      - {unit: minute, requests_per_unit: 10}
      - {unit: minute, requests_per_unit: 10, algorithm: token_bucket}
)");
  EXPECT_EQ(config->RuleCount(), 1u);
}

// Verifies an unlimited rule cannot share its descriptor with other rules.
TEST_F(ConfigLoaderTest, RejectsUnlimitedAmongSeveralRules) {
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limits:
      - {unit: minute, requests_per_unit: 10}
      - {unlimited: true}
)"),
            "test.yaml:6: descriptors[0].rate_limits[1]: an unlimited rule must be the only "
            "rule of its descriptor");
}

// Verifies the unit is required and must be one of the seven names, case-insensitively.
TEST_F(ConfigLoaderTest, RejectsMissingOrInvalidUnit) {
  EXPECT_EQ(LoadError(R"(
domain: api
descriptors:
  - key: service
    value: users
    descriptors:
      - key: method
        value: GET
        rate_limit: {unit: SeCoNd, requests_per_unit: 5}
      - key: method
        value: POST
        rate_limit:
          unit: fortnight
          requests_per_unit: 5
)"),
            "test.yaml:12: descriptors[0].descriptors[1].rate_limit.unit: invalid unit "
            "'fortnight' (expected second, minute, hour, day, week, month or year)");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limit:
      requests_per_unit: 5
)"),
            "test.yaml:4: descriptors[0].rate_limit.unit: missing (expected second, minute, "
            "hour, day, week, month or year)");
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limit: {unit: unknown, requests_per_unit: 5}
)"),
            "test.yaml:4: descriptors[0].rate_limit.unit: invalid unit 'unknown' (expected "
            "second, minute, hour, day, week, month or year)");
}

// Verifies requests_per_unit is required and must be an unsigned 32-bit integer.
TEST_F(ConfigLoaderTest, RejectsBadRequestsPerUnit) {
  auto error = [](absl::string_view value) {
    return LoadError(absl::StrCat(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
        "      requests_per_unit: ",
        value, "\n"));
  };
  const std::string prefix = "test.yaml:6: descriptors[0].rate_limit.requests_per_unit: ";
  EXPECT_EQ(error("abc"), prefix + "expected an unsigned 32-bit integer, got 'abc'");
  EXPECT_EQ(error("-1"), prefix + "expected an unsigned 32-bit integer, got '-1'");
  EXPECT_EQ(error("1.5"), prefix + "expected an unsigned 32-bit integer, got '1.5'");
  EXPECT_EQ(error("1e3"), prefix + "expected an unsigned 32-bit integer, got '1e3'");
  EXPECT_EQ(error("4294967296"), prefix + "4294967296 is out of range (at most 4294967295)");
  EXPECT_EQ(error("99999999999999999999999"),
            prefix + "99999999999999999999999 is out of range (at most 4294967295)");
  EXPECT_EQ(error("\"500\""),
            prefix + "expected an unsigned 32-bit integer, got the quoted string '500'");
  EXPECT_EQ(error("0500"), prefix +
                               "expected an unsigned 32-bit integer, got '0500' (a leading zero "
                               "means octal in YAML 1.1)");
  EXPECT_EQ(error("[5]"), prefix + "expected an unsigned 32-bit integer, got a list");
  EXPECT_EQ(error(""), "");  // 0, with a warning (ReadsEmptyUpstreamFieldsAsUpstreamDoes)
  EXPECT_EQ(error("0"), "");  // upstream's README blocks an IP with 0 per second
  EXPECT_EQ(error("4294967295"), "");
  EXPECT_EQ(error("+7"), "");

}

// Verifies unlimited takes a boolean and excludes every field that describes a limit (but
// requests_per_unit, which envoyproxy/ratelimit ignores: see AcceptsUpstreamLenientRules).
TEST_F(ConfigLoaderTest, RejectsUnlimitedWithLimitFields) {
  auto error = [](absl::string_view field) {
    return LoadError(absl::StrCat(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      ",
        field, "\n"));
  };
  EXPECT_EQ(error("unit: second"),
            "test.yaml:6: descriptors[0].rate_limit.unit: must not be set when unlimited is "
            "true");
  EXPECT_EQ(error("algorithm: gcra"),
            "test.yaml:6: descriptors[0].rate_limit.algorithm: must not be set when unlimited "
            "is true");
  EXPECT_EQ(error("burst: 5"),
            "test.yaml:6: descriptors[0].rate_limit.burst: must not be set when unlimited is "
            "true");
  EXPECT_EQ(error("unit_multiplier: 2"),
            "test.yaml:6: descriptors[0].rate_limit.unit_multiplier: must not be set when "
            "unlimited is true");
  EXPECT_EQ(error("hash_tag: user"),
            "test.yaml:6: descriptors[0].rate_limit.hash_tag: must not be set when unlimited "
            "is true");
  EXPECT_EQ(error("local_share: 0.5"),
            "test.yaml:6: descriptors[0].rate_limit.local_share: must not be set when "
            "unlimited is true");
  EXPECT_EQ(error("name: free"), "");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n"
                      "      unlimited: sometimes\n"),
            "test.yaml:5: descriptors[0].rate_limit.unlimited: expected true or false, got "
            "'sometimes'");
  // unlimited: false is an ordinary rule, which needs its unit.
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n"
                      "      unlimited: false\n"),
            "test.yaml:4: descriptors[0].rate_limit.unit: missing (expected second, minute, "
            "hour, day, week, month or year)");
}

// Verifies hash_tag names an entry key: a non-empty string, kept on the rule.
TEST_F(ConfigLoaderTest, HashTagNamesAnEntry) {
  std::unique_ptr<Config> config = Load(
      "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
      "      requests_per_unit: 1\n      hash_tag: user_id\n");
  const DescriptorNode* node = Node(*config, "a", {"k"});
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->rules[0].hash_tag, "user_id");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n"
                      "      unit: second\n      requests_per_unit: 1\n      hash_tag: ''\n"),
            "test.yaml:7: descriptors[0].rate_limit.hash_tag: must name a descriptor entry key "
            "(e.g. user_id), not be empty");
  EXPECT_EQ(LoadError("domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n"
                      "      unit: second\n      requests_per_unit: 1\n      hash_tag: [x]\n"),
            "test.yaml:7: descriptors[0].rate_limit.hash_tag: expected a string, got a list");
}

// Verifies replaces must be a list of maps, each naming another rule.
TEST_F(ConfigLoaderTest, RejectsBadReplaces) {
  auto error = [](absl::string_view replaces) {
    return LoadError(absl::StrCat(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
        "      requests_per_unit: 5\n      name: mine\n      replaces: ",
        replaces, "\n"));
  };
  const std::string prefix = "test.yaml:8: descriptors[0].rate_limit.replaces";
  EXPECT_EQ(error("other"), prefix + ": expected a list of {name: ...} maps, got 'other'");
  EXPECT_EQ(error("[other]"), prefix + "[0]: expected a map with 'name', got 'other'");
  EXPECT_EQ(error("[{}]"), prefix + "[0].name: must be a non-empty rule name");
  EXPECT_EQ(error("[{name: ''}]"), prefix + "[0].name: must be a non-empty rule name");
  EXPECT_EQ(error("[{name: other}, {name: mine}]"),
            prefix + "[1].name: a rule cannot replace itself ('mine')");
  EXPECT_EQ(error("[{name: other}]"), "");
}

// Verifies the algorithm must be one of the six names.
TEST_F(ConfigLoaderTest, RejectsUnknownAlgorithm) {
  EXPECT_EQ(LoadError(R"(
domain: a
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 5
      algorithm: leaky
)"),
            "test.yaml:7: descriptors[0].rate_limit.algorithm: invalid algorithm 'leaky' "
            "(expected fixed_window, sliding_window_log, sliding_window_counter, token_bucket, "
            "leaky_bucket, gcra or concurrency)");
}

// Verifies burst is refused on the window algorithms and must be at least 1 on the others.
TEST_F(ConfigLoaderTest, RejectsBadBurst) {
  auto error = [](absl::string_view algorithm, absl::string_view burst) {
    return LoadError(absl::StrCat(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
        "      requests_per_unit: 5\n",
        algorithm.empty() ? "" : absl::StrCat("      algorithm: ", algorithm, "\n"),
        "      burst: ", burst, "\n"));
  };
  const std::string prefix = "test.yaml:";
  EXPECT_EQ(error("", "10"),
            "test.yaml:7: descriptors[0].rate_limit.burst: not allowed with algorithm "
            "fixed_window (only token_bucket, leaky_bucket and gcra have a burst)");
  EXPECT_EQ(error("sliding_window_log", "10"),
            "test.yaml:8: descriptors[0].rate_limit.burst: not allowed with algorithm "
            "sliding_window_log (only token_bucket, leaky_bucket and gcra have a burst)");
  EXPECT_EQ(error("sliding_window_counter", "10"),
            "test.yaml:8: descriptors[0].rate_limit.burst: not allowed with algorithm "
            "sliding_window_counter (only token_bucket, leaky_bucket and gcra have a burst)");
  EXPECT_EQ(error("token_bucket", "0"),
            "test.yaml:8: descriptors[0].rate_limit.burst: must be at least 1");
  EXPECT_EQ(error("gcra", "lots"),
            "test.yaml:8: descriptors[0].rate_limit.burst: expected an unsigned 32-bit "
            "integer, got 'lots'");
  EXPECT_EQ(error("leaky_bucket", "1"), "");
}

// Verifies unit_multiplier must be at least 1 and keep the period within 2^50 microseconds.
TEST_F(ConfigLoaderTest, RejectsBadUnitMultiplier) {
  auto error = [](absl::string_view unit, absl::string_view multiplier) {
    return LoadError(absl::StrCat(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: ", unit,
        "\n      requests_per_unit: 5\n      unit_multiplier: ", multiplier, "\n"));
  };
  EXPECT_EQ(error("second", "0"),
            "test.yaml:7: descriptors[0].rate_limit.unit_multiplier: must be at least 1");
  EXPECT_EQ(error("year", "4294967295"),
            "test.yaml:7: descriptors[0].rate_limit.unit_multiplier: period too long: at most "
            "35 years");
  EXPECT_EQ(error("year", "35"), "");
  EXPECT_EQ(error("second", "1125899906"), "");
  EXPECT_EQ(error("second", "1125899907"),
            "test.yaml:7: descriptors[0].rate_limit.unit_multiplier: period too long: at most "
            "1125899906 seconds");
  EXPECT_EQ(error("second", "-2"),
            "test.yaml:7: descriptors[0].rate_limit.unit_multiplier: expected an unsigned "
            "32-bit integer, got '-2'");
}

// ---- Limits: what a config may cost to load.

// The 495-byte file of the report (issue 29): seven levels of ten aliases under metadata, 10^8
// scalars once expanded (gigabytes and half a minute before the budget existed).
std::string AliasBomb() {
  std::string text =
      "domain: bomb\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
      "requests_per_unit: 1}\n    metadata:\n      x0: &a0 [lol, lol, lol, lol, lol, lol, lol, "
      "lol, lol, lol]\n";
  for (int level = 1; level <= 7; ++level) {
    absl::StrAppend(&text, "      x", level, ": &a", level, " [");
    for (int i = 0; i < 10; ++i) {
      absl::StrAppend(&text, i == 0 ? "" : ", ", "*a", level - 1);
    }
    absl::StrAppend(&text, "]\n");
  }
  return text;
}

// Verifies nested aliases under metadata are refused at the node budget, naming the file, the
// line and field of the alias that passed it, the anchor it repeats and the limit.
TEST_F(ConfigLoaderTest, RefusesAliasBombInMetadata) {
  EXPECT_EQ(LoadError(AliasBomb()),
            "test.yaml:11: descriptors[0].metadata.x5[7]: the configuration grows past 1000000 "
            "YAML nodes (--config_max_nodes), counted over all files with every alias expanded "
            "each time it is used; this alias repeats the anchor at line 10 (111111 nodes, "
            "300000 bytes)");
}

// Counting an alias at each use, exactly, is tested in config_metadata_test.cc: its example
// loads metadata, which builds protobuf maps (no TSan there).

// Verifies aliased descriptor lists count too: each level of the tree repeats the one below.
TEST_F(ConfigLoaderTest, CountsAliasedDescriptors) {
  std::string text = "domain: a\ndescriptors:\n  - key: l0\n    descriptors: &d0\n"
                     "      - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n";
  for (int level = 1; level <= 20; ++level) {
    absl::StrAppend(&text, "  - key: l", level, "\n    descriptors: &d", level,
                    "\n      - {key: a, descriptors: *d", level - 1,
                    "}\n      - {key: b, descriptors: *d", level - 1, "}\n");
  }
  EXPECT_THAT(LoadError(text), HasSubstr("grows past 1000000 YAML nodes"));
}

// Verifies a text larger than the file cap is refused before it is parsed.
TEST_F(ConfigLoaderTest, RefusesTextLargerThanFileCap) {
  ConfigLoadOptions options;
  options.max_file_bytes = 16;
  EXPECT_TRUE(LoadConfigSources({{"a.yaml", "domain: sixteen\n"}}, options).ok());
  absl::StatusOr<std::unique_ptr<Config>> config =
      LoadConfigSources({{"a.yaml", "domain: seventeen\n"}}, options);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "a.yaml: file is larger than 16 bytes (--config_max_file_bytes); not parsed");
}

// Verifies YAML nested past the scanner's limit is refused naming the limit, the line and the
// field, whatever the parser's own (much deeper) limit would have said ("bad file").
TEST_F(ConfigLoaderTest, RefusesDeepNestingNamingTheLimit) {
  const std::string text = absl::StrCat("domain: a\ndescriptors:\n  - key: k\n    metadata:\n"
                                        "      deep: ",
                                        std::string(3000, '['), std::string(3000, ']'), "\n");
  EXPECT_EQ(LoadError(text),
            "test.yaml:5: descriptors[0].metadata.deep[0][0][0][0][0][0][0][0][0][0][0][0][...]"
            "[0][0][0][0][0][0][0][0]: nested more than 256 levels deep");
}

// Verifies many documents are named as such, with the number read, not as a syntax error.
TEST_F(ConfigLoaderTest, RefusesMoreDocumentsThanAreRead) {
  std::string text = "domain: a\n";
  for (int i = 0; i < 70; ++i) {
    text += "---\n";
  }
  EXPECT_EQ(LoadError(text),
            "test.yaml:65: more than 64 YAML documents in the file (at most 64 are read: one "
            "holding the domain, the rest empty)");
  // Empty documents up to the limit are harmless.
  EXPECT_EQ(LoadError("domain: a\n---\n---\n"), "");
}

// Verifies a sliding_window_log rule whose key could pass 1 MiB in Redis is warned about, with
// the estimate and what to use instead; one just below is not.
TEST_F(ConfigLoaderTest, WarnsOfLargeSlidingWindowLogKeys) {
  std::unique_ptr<Config> config = Load(R"(
domain: a
descriptors:
  - key: small
    rate_limit: {algorithm: sliding_window_log, unit: hour, requests_per_unit: 8738}
  - key: large
    rate_limits:
      - {algorithm: sliding_window_counter, unit: second, requests_per_unit: 1000000}
      - {algorithm: sliding_window_log, unit: minute, requests_per_unit: 1000000}
)");
  ASSERT_EQ(config->warnings().size(), 1u);
  EXPECT_EQ(config->warnings()[0],
            "test.yaml:8: descriptors[1].rate_limits[1]: sliding_window_log keeps one entry per "
            "admitted request, so one key can grow to 1000000 entries, about 114 MiB in Redis "
            "(~120 bytes each; warned above 1 MiB); sliding_window_counter keeps two counters "
            "per key, or use a shorter unit with a proportionally smaller requests_per_unit");
  EXPECT_EQ(Load("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: "
                 "sliding_window_log, unit: hour, requests_per_unit: 8739}\n")
                ->warnings()
                .size(),
            1u);
}

// Verifies merging a domain's files still refuses a wildcard descriptor defined in both.
TEST_F(ConfigLoaderTest, MergeRefusesWildcardDefinedInBothFiles) {
  ConfigLoadOptions merge;
  merge.merge_domains = true;
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigSources(
      {{"a.yaml", "domain: x\ndescriptors:\n  - key: w\n    value: 'p*'\n"},
       {"b.yaml", "domain: x\ndescriptors:\n  - key: w\n    value: 'q*'\n"
                  "  - key: w\n    value: 'p*'\n"}},
      merge);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "b.yaml:5: duplicate descriptor: key 'w' value 'p*' of domain 'x' is already "
            "defined at a.yaml:3");
}

// ---- Loading from the file system.

class ConfigLoaderPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("sluice_config_loader_test_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::filesystem::path& relative, absl::string_view text) {
    std::filesystem::create_directories((dir_ / relative).parent_path());
    std::ofstream out(dir_ / relative, std::ios::binary);
    out << text;
  }

  std::filesystem::path dir_;
};

// Verifies a directory loads every *.yaml and *.yml file directly inside it, in name order,
// skipping dot files, other extensions and subdirectories, and following symlinked files
// as a Kubernetes ConfigMap mount lays them out.
TEST_F(ConfigLoaderPathTest, LoadsDirectory) {
  Write("b.yml", "domain: beta\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                 "requests_per_unit: 2}\n");
  Write("a.yaml", "domain: alpha\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                  "requests_per_unit: 1}\n");
  // Each of these would fail the load if it were read.
  Write(".hidden.yaml", "not: valid: yaml: [\n");
  Write("README.md", "domain: [\n");
  Write("sub/c.yaml", "domain: alpha\n");
  Write("..2024_01_01/gamma.yaml", "domain: gamma\n");
  std::filesystem::create_directory_symlink(dir_ / "..2024_01_01", dir_ / "..data");
  std::filesystem::create_symlink(dir_ / "..data" / "gamma.yaml", dir_ / "gamma.yaml");

  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(dir_.string());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->domains().size(), 3u);
  ASSERT_TRUE((*config)->HasDomain("alpha"));
  ASSERT_TRUE((*config)->HasDomain("beta"));
  ASSERT_TRUE((*config)->HasDomain("gamma"));
  EXPECT_EQ((*config)->domains().at("alpha")->file, (dir_ / "a.yaml").string());
  EXPECT_EQ((*config)->domains().at("beta")->file, (dir_ / "b.yml").string());
  EXPECT_EQ((*config)->domains().at("gamma")->file, (dir_ / "gamma.yaml").string());
  EXPECT_EQ((*config)->RuleCount(), 2u);
}

// Verifies files are loaded in name order: the later file is the one named as the duplicate.
TEST_F(ConfigLoaderPathTest, LoadsDirectoryInNameOrder) {
  Write("z.yaml", "domain: same\n");
  Write("m.yaml", "domain: same\n");
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            absl::StrCat((dir_ / "z.yaml").string(), ":1: domain: duplicate domain 'same' "
                         "(first defined in ", (dir_ / "m.yaml").string(),
                         "; --merge_domain_config merges files of one domain)"));
}

// Verifies an error in one file of a directory names that file.
TEST_F(ConfigLoaderPathTest, NamesFileOfErrorInDirectory) {
  Write("a.yaml", "domain: a\n");
  Write("b.yaml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: eon}\n");
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            absl::StrCat((dir_ / "b.yaml").string(),
                         ":4: descriptors[0].rate_limit.unit: invalid unit 'eon' (expected "
                         "second, minute, hour, day, week, month or year)"));
}

// Verifies a single file path loads that file, whatever its extension.
TEST_F(ConfigLoaderPathTest, LoadsSingleFile) {
  Write("limits.conf", "domain: single\n");
  absl::StatusOr<std::unique_ptr<Config>> config =
      LoadConfigPath((dir_ / "limits.conf").string());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE((*config)->HasDomain("single"));
  EXPECT_EQ((*config)->domains().at("single")->file, (dir_ / "limits.conf").string());
}

// Verifies a path that does not exist is refused, saying so.
TEST_F(ConfigLoaderPathTest, RejectsMissingPath) {
  const std::string missing = (dir_ / "nope").string();
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(missing);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(), missing + ": no such file or directory");
}

// Verifies a directory without any YAML file is refused, saying so.
TEST_F(ConfigLoaderPathTest, RejectsDirectoryWithoutYaml) {
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            dir_.string() + ": directory has no *.yaml or *.yml files");
  Write(".hidden.yaml", "domain: hidden\n");
  Write("notes.txt", "domain: notes\n");
  config = LoadConfigPath(dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            dir_.string() + ": directory has no *.yaml or *.yml files");
}

// Verifies the runtime layout (envoyproxy/ratelimit's RUNTIME_ROOT tree) reads every file of
// any name, in subdirectories too, and always skips Kubernetes' ..data and ..<timestamp>
// entries of a ConfigMap mount; other dot names only when ignore_dot_files.
TEST_F(ConfigLoaderPathTest, LoadsRuntimeTreeRecursively) {
  const std::string rule = "\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                           "requests_per_unit: 1}\n";
  // A ConfigMap mount: the real files live in ..<timestamp>/, reached through ..data.
  Write("..2026_11_24_00_00_00.1/config.yaml", "domain: mounted" + rule);
  std::filesystem::create_directory_symlink("..2026_11_24_00_00_00.1", dir_ / "..data");
  std::filesystem::create_symlink("..data/config.yaml", dir_ / "config.yaml");
  Write("team/limits.conf", "domain: nested" + rule);
  Write(".hidden", "domain: hidden" + rule);

  ConfigLoadOptions runtime;
  runtime.recursive = true;
  runtime.ignore_dot_files = false;
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(dir_.string(), runtime);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE((*config)->HasDomain("mounted"));
  EXPECT_TRUE((*config)->HasDomain("nested"));
  EXPECT_TRUE((*config)->HasDomain("hidden"));
  EXPECT_EQ((*config)->domains().size(), 3u);
  EXPECT_EQ((*config)->domains().at("nested")->file, (dir_ / "team/limits.conf").string());

  runtime.ignore_dot_files = true;
  config = LoadConfigPath(dir_.string(), runtime);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE((*config)->HasDomain("hidden"));
  EXPECT_EQ((*config)->domains().size(), 2u);

  // The flat layout of the same directory reads config.yaml only.
  config = LoadConfigPath(dir_.string());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)->domains().size(), 1u);
  EXPECT_TRUE((*config)->HasDomain("mounted"));
}

// Verifies an empty runtime tree is an empty config (upstream starts with no domains), while
// the flat layout still refuses a directory without YAML files.
TEST_F(ConfigLoaderPathTest, EmptyRuntimeTreeIsEmptyConfig) {
  ConfigLoadOptions runtime;
  runtime.recursive = true;
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(dir_.string(), runtime);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE((*config)->domains().empty());
  EXPECT_FALSE(LoadConfigPath(dir_.string()).ok());
}

// Verifies a symlinked file whose target is gone is reported, not silently skipped.
TEST_F(ConfigLoaderPathTest, RejectsDanglingSymlink) {
  Write("a.yaml", "domain: a\n");
  std::filesystem::create_symlink(dir_ / "gone.txt", dir_ / "b.yaml");
  absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigPath(dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr((dir_ / "b.yaml").string()));
}

// Verifies a file larger than --config_max_file_bytes is refused by name without being parsed.
TEST_F(ConfigLoaderPathTest, RefusesFileLargerThanCap) {
  Write("a.yaml", absl::StrCat("domain: a\n# ", std::string(200, 'x'), "\n"));
  ConfigLoadOptions options;
  options.max_file_bytes = 100;
  absl::StatusOr<std::unique_ptr<Config>> config =
      LoadConfigPath((dir_ / "a.yaml").string(), options);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            absl::StrCat((dir_ / "a.yaml").string(),
                         ": file is larger than 100 bytes (--config_max_file_bytes); not parsed"));
  options.max_file_bytes = 213;
  EXPECT_TRUE(LoadConfigPath((dir_ / "a.yaml").string(), options).ok());
}

}  // namespace
}  // namespace sluice
