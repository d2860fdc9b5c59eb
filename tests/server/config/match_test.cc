// Config::Match against envoyproxy/ratelimit's documented behaviour: the README's examples 1 to 9
// as YAML, requests and the node (and limit) each request must reach, then the rules the README
// implies but does not spell out (no backtracking, exact depth, the order exact > wildcard >
// default).
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config.h"
#include "server/config/config_loader.h"

// GCC cannot see that the replacement operator new below is malloc-based.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Counts heap allocations while `g_count_allocations` is set, to hold Match to its promise of
// not allocating for exact and default lookups.
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<size_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  if (g_count_allocations.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  return p;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace sluice {
namespace {

using Request = std::vector<std::pair<std::string, std::string>>;

class MatchTest : public ::testing::Test {
 protected:
  // Loads `yaml` (its first line may be empty, for readability), failing the test on error.
  void Load(absl::string_view yaml) {
    if (!yaml.empty() && yaml[0] == '\n') {
      yaml.remove_prefix(1);
    }
    absl::StatusOr<std::unique_ptr<Config>> config = LoadConfigText("match.yaml", yaml);
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
  }

  const DescriptorNode* Match(absl::string_view domain, const Request& request) const {
    std::vector<DescriptorEntryView> entries;
    for (const auto& [key, value] : request) {
      entries.push_back(DescriptorEntryView{key, value});
    }
    return config_->Match(domain, entries);
  }

  // The full_key of the node `request` reaches, or "none".
  std::string Matched(absl::string_view domain, const Request& request) const {
    const DescriptorNode* node = Match(domain, request);
    return node == nullptr ? "none" : node->full_key;
  }

  // requests_per_unit of the first rule `request` reaches, or -1 if none.
  int64_t Limit(absl::string_view domain, const Request& request) const {
    const DescriptorNode* node = Match(domain, request);
    return node == nullptr ? -1 : static_cast<int64_t>(node->rules[0].requests_per_unit);
  }

  std::unique_ptr<Config> config_;
};

// ---- The README's examples.

// Verifies README example 1: two values of one key, each with its own limit; "default" there is
// an ordinary value, not a catch-all.
TEST_F(MatchTest, ReadmeExample1) {
  Load(R"(
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
  EXPECT_EQ(Matched("mongo_cps", {{"database", "users"}}), "mongo_cps.database_users");
  EXPECT_EQ(Matched("mongo_cps", {{"database", "default"}}), "mongo_cps.database_default");
  EXPECT_EQ(Matched("mongo_cps", {{"database", "orders"}}), "none");
  EXPECT_EQ(Matched("mongo_cps", {{"database", ""}}), "none");
  EXPECT_EQ(Matched("mongo_cps", {{"table", "users"}}), "none");
  EXPECT_EQ(Limit("mongo_cps", {{"database", "users"}}), 500);
}

// Verifies README example 2: a placeholder with a nested default, beside a top-level default.
TEST_F(MatchTest, ReadmeExample2) {
  Load(R"(
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
)");
  EXPECT_EQ(Matched("messaging", {{"message_type", "marketing"}, {"to_number", "2061111111"}}),
            "messaging.message_type_marketing.to_number");
  EXPECT_EQ(Limit("messaging", {{"message_type", "marketing"}, {"to_number", "2062222222"}}), 5);
  EXPECT_EQ(Matched("messaging", {{"to_number", "2061111111"}}), "messaging.to_number");
  EXPECT_EQ(Limit("messaging", {{"to_number", "2062222222"}}), 100);
  // The placeholder has no limit of its own.
  EXPECT_EQ(Matched("messaging", {{"message_type", "marketing"}}), "none");
  EXPECT_EQ(Matched("messaging", {{"message_type", "transactional"}, {"to_number", "1"}}),
            "none");
}

// Verifies README example 3: the exact key_value beats the key's default.
TEST_F(MatchTest, ReadmeExample3) {
  Load(R"(
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
)");
  EXPECT_EQ(Limit("edge_proxy_per_ip", {{"remote_address", "50.0.0.1"}}), 10);
  EXPECT_EQ(Matched("edge_proxy_per_ip", {{"remote_address", "50.0.0.1"}}),
            "edge_proxy_per_ip.remote_address");
  EXPECT_EQ(Limit("edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}}), 0);
  EXPECT_EQ(Matched("edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}}),
            "edge_proxy_per_ip.remote_address_50.0.0.5");
}

// Verifies README example 4: a request deeper than the configured rule does not match it; one of
// the same depth does.
TEST_F(MatchTest, ReadmeExample4) {
  const Request request = {{"key", "value"}, {"subkey", "subvalue"}};
  Load(R"(
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
)");
  EXPECT_EQ(Matched("example4", request), "none");
  EXPECT_EQ(Limit("example4", {{"key", "value"}}), 300);

  Load(R"(
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
)");
  EXPECT_EQ(Matched("example4", request), "example4.key_value.subkey");
  EXPECT_EQ(Matched("example4", {{"key", "value"}}), "none");
}

// Verifies README example 5: an unlimited rule is still returned, for the caller to allow.
TEST_F(MatchTest, ReadmeExample5) {
  Load(R"(
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
)");
  const DescriptorNode* ldap = Match("internal", {{"ldap", "cn=x"}});
  ASSERT_NE(ldap, nullptr);
  ASSERT_EQ(ldap->rules.size(), 1u);
  EXPECT_TRUE(ldap->rules[0].unlimited);
  const DescriptorNode* azure = Match("internal", {{"azure", "vm"}});
  ASSERT_NE(azure, nullptr);
  EXPECT_FALSE(azure->rules[0].unlimited);
  EXPECT_EQ(azure->rules[0].requests_per_unit, 100u);
  EXPECT_EQ(azure->rules[0].unit, TimeUnit::kMinute);
}

// Verifies README example 6: shadow_mode is carried by the node the request reaches.
TEST_F(MatchTest, ReadmeExample6) {
  Load(R"(
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
)");
  const DescriptorNode* a = Match("example6", {{"service", "auth-service"}, {"user", "user-a"}});
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->shadow_mode);
  EXPECT_EQ(a->rules[0].requests_per_unit, 10u);
  const DescriptorNode* b = Match("example6", {{"service", "auth-service"}, {"user", "user-b"}});
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->shadow_mode);
  EXPECT_EQ(b->rules[0].requests_per_unit, 20u);
  EXPECT_EQ(Matched("example6", {{"service", "auth-service"}, {"user", "user-c"}}), "none");
}

// Verifies README example 7: each descriptor reaches its own rule, carrying the name and the
// replaces list the caller uses to drop the replaced rule.
TEST_F(MatchTest, ReadmeExample7) {
  Load(R"(
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
)");
  const DescriptorNode* first =
      Match("example7", {{"key_1", "value_1"}, {"user", "bkthomps"}});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->rules[0].name, "specific_limit");
  EXPECT_EQ(first->rules[0].requests_per_unit, 5u);
  const DescriptorNode* second =
      Match("example7", {{"key_2", "value_2"}, {"user", "bkthomps"}});
  ASSERT_NE(second, nullptr);
  EXPECT_THAT(second->rules[0].replaces, ::testing::ElementsAre("specific_limit"));
  EXPECT_EQ(second->rules[0].requests_per_unit, 10u);
  EXPECT_EQ(Matched("example7", {{"key_1", "value_1"}, {"user", "other"}}), "none");
}

// Verifies README example 8: detailed_metric is carried by the default node that unspecified
// values reach; the explicit value has its own node.
TEST_F(MatchTest, ReadmeExample8) {
  Load(R"(
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
)");
  const DescriptorNode* unspecified = Match("example8", {{"key1", "unspecified_value"}});
  ASSERT_NE(unspecified, nullptr);
  EXPECT_TRUE(unspecified->detailed_metric);
  EXPECT_EQ(unspecified->full_key, "example8.key1");
  EXPECT_EQ(unspecified->rules[0].requests_per_unit, 10u);
  const DescriptorNode* value1 = Match("example8", {{"key1", "value1"}});
  ASSERT_NE(value1, nullptr);
  EXPECT_FALSE(value1->detailed_metric);
  EXPECT_EQ(value1->rules[0].requests_per_unit, 20u);
}

// Verifies README example 9: a trailing `*` matches any value with that prefix.
TEST_F(MatchTest, ReadmeExample9) {
  Load(R"(
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
)");
  EXPECT_EQ(Matched("example9", {{"key1", "value_1"}}), "example9.key1_value*");
  EXPECT_EQ(Matched("example9", {{"key1", "value_2"}}), "example9.key1_value*");
  EXPECT_EQ(Matched("example9", {{"key1", "value"}}), "example9.key1_value*");
  EXPECT_EQ(Matched("example9", {{"key1", "valu"}}), "none");
  EXPECT_EQ(Matched("example9", {{"key1", "xvalue_1"}}), "none");
  EXPECT_EQ(Matched("example9", {{"key2", "value_1"}}), "none");
}

// ---- Domains and depth.

// Verifies an unknown domain, or an empty descriptor, matches nothing.
TEST_F(MatchTest, UnknownDomainAndEmptyDescriptorMatchNothing) {
  Load(R"(
domain: known
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  EXPECT_TRUE(config_->HasDomain("known"));
  EXPECT_FALSE(config_->HasDomain("unknown"));
  EXPECT_EQ(Matched("unknown", {{"k", "v"}}), "none");
  EXPECT_EQ(Matched("known", {}), "none");
  EXPECT_EQ(Matched("known", {{"k", "v"}}), "known.k");
}

// Verifies a rule applies only to requests that end on its node: a rule passed on the way to
// a deeper node does not apply, and a shorter request stops on the node it ends on.
TEST_F(MatchTest, DepthMustEqualConfigDepth) {
  Load(R"(
domain: depth
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: b
        descriptors:
          - key: c
            rate_limit: {unit: second, requests_per_unit: 3}
)");
  EXPECT_EQ(Limit("depth", {{"a", "x"}}), 1);
  EXPECT_EQ(Matched("depth", {{"a", "x"}, {"b", "y"}}), "none");  // b has no rule
  EXPECT_EQ(Limit("depth", {{"a", "x"}, {"b", "y"}, {"c", "z"}}), 3);
  EXPECT_EQ(Matched("depth", {{"a", "x"}, {"b", "y"}, {"c", "z"}, {"d", "w"}}), "none");
  EXPECT_EQ(Matched("depth", {{"a", "x"}, {"c", "z"}}), "none");  // order matters
}

// ---- Choice at one level: exact, then wildcard, then default.

// Verifies exact beats wildcard beats default, and wildcards are tried in declaration order.
TEST_F(MatchTest, ExactBeatsWildcardBeatsDefault) {
  Load(R"(
domain: order
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: fo*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: f*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    value: foo
    rate_limit: {unit: second, requests_per_unit: 4}
)");
  EXPECT_EQ(Limit("order", {{"k", "foo"}}), 4);
  EXPECT_EQ(Limit("order", {{"k", "food"}}), 2);  // both wildcards match; the first declared
  EXPECT_EQ(Limit("order", {{"k", "fa"}}), 3);
  EXPECT_EQ(Limit("order", {{"k", "bar"}}), 1);
  EXPECT_EQ(Limit("order", {{"k", ""}}), 1);

  Load(R"(
domain: order
descriptors:
  - key: k
    value: f*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    value: fo*
    rate_limit: {unit: second, requests_per_unit: 2}
)");
  EXPECT_EQ(Limit("order", {{"k", "food"}}), 3);
  EXPECT_EQ(Limit("order", {{"k", "bar"}}), -1);
}

// Verifies `*` works at the start, in the middle, several times, and alone.
TEST_F(MatchTest, GlobPatternsAnywhereInValue) {
  Load(R"(
domain: glob
descriptors:
  - key: suffix
    value: "*bar"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: middle
    value: a*b*c
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: any
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: /api/*/users
    rate_limit: {unit: second, requests_per_unit: 4}
)");
  EXPECT_EQ(Limit("glob", {{"suffix", "foobar"}}), 1);
  EXPECT_EQ(Limit("glob", {{"suffix", "bar"}}), 1);
  EXPECT_EQ(Limit("glob", {{"suffix", "barfoo"}}), -1);
  EXPECT_EQ(Limit("glob", {{"middle", "abc"}}), 2);
  EXPECT_EQ(Limit("glob", {{"middle", "aXXbYYc"}}), 2);
  EXPECT_EQ(Limit("glob", {{"middle", "abcbc"}}), 2);
  EXPECT_EQ(Limit("glob", {{"middle", "acb"}}), -1);
  EXPECT_EQ(Limit("glob", {{"middle", "abcd"}}), -1);
  EXPECT_EQ(Limit("glob", {{"any", ""}}), 3);
  EXPECT_EQ(Limit("glob", {{"any", "anything at all"}}), 3);
  EXPECT_EQ(Limit("glob", {{"path", "/api/v1/users"}}), 4);
  EXPECT_EQ(Limit("glob", {{"path", "/api/v1/groups"}}), -1);
}

// Verifies a wildcard only matches entries of its own key.
TEST_F(MatchTest, WildcardRequiresSameKey) {
  Load(R"(
domain: keys
descriptors:
  - key: a
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  EXPECT_EQ(Limit("keys", {{"a", "x"}}), 1);
  EXPECT_EQ(Limit("keys", {{"b", "x"}}), -1);
}

// ---- A `*` in a key (envoyproxy/ratelimit's GetLimit matches every wildcard descriptor's
// "key[_value]" against the request entry's "key_value").

// Verifies a key with `*` matches the request's "key_value" text: the key `user_*` takes every
// value of `user` (the empty one too: "user_") and any key starting `user_`.
TEST_F(MatchTest, KeyWildcardMatchesKeyValueText) {
  Load(R"(
domain: kw
descriptors:
  - key: user_*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: "*_id"
    value: "42"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: "*"
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 3}
)");
  EXPECT_EQ(Limit("kw", {{"user", "alice"}}), 1);
  EXPECT_EQ(Limit("kw", {{"user", ""}}), 1);
  EXPECT_EQ(Limit("kw", {{"user_id", "7"}}), 1);  // "user_id_7": the first wildcard declared
  EXPECT_EQ(Limit("kw", {{"tenant_id", "42"}}), 2);
  EXPECT_EQ(Limit("kw", {{"tenant_id", "43"}}), -1);  // "*" has no rule at this depth
  EXPECT_EQ(Limit("kw", {{"anything", "x"}, {"path", "/a"}}), 3);
  EXPECT_EQ(Limit("kw", {{"use", "r_x"}, {"path", "/a"}}), 3);  // "use_r_x" is not "user_..."
  EXPECT_EQ(Matched("kw", {{"user", "alice"}}), "kw.user_*");
  EXPECT_EQ(Matched("kw", {{"tenant_id", "42"}}), "kw.*_id_42");
}

// Verifies a key wildcard's place among the others: the exact key and value first, then every
// wildcard, of key or value, in file order, and the key's default last.
TEST_F(MatchTest, KeyWildcardAfterExactBeforeDefault) {
  Load(R"(
domain: kwp
descriptors:
  - key: route
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: ro*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: route
    value: checkout
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: route
    value: check*
    rate_limit: {unit: second, requests_per_unit: 4}
)");
  EXPECT_EQ(Limit("kwp", {{"route", "checkout"}}), 3);
  EXPECT_EQ(Limit("kwp", {{"route", "checkin"}}), 2);  // the key wildcard is declared first
  EXPECT_EQ(Limit("kwp", {{"route", "x"}}), 2);        // over the key's default
  EXPECT_EQ(Limit("kwp", {{"rollout", "x"}}), 2);
  EXPECT_EQ(Limit("kwp", {{"other", "x"}}), -1);
  MatchSteps steps;
  const DescriptorEntryView entries[] = {{"route", "x"}};
  ASSERT_NE(config_->Match("kwp", entries, &steps), nullptr);
  EXPECT_EQ(steps[0].how, MatchStep::How::kWildcard);

  Load(R"(
domain: kwp
descriptors:
  - key: route
    value: check*
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: ro*
    rate_limit: {unit: second, requests_per_unit: 2}
)");
  EXPECT_EQ(Limit("kwp", {{"route", "checkin"}}), 4);
  EXPECT_EQ(Limit("kwp", {{"route", "x"}}), 2);
}

// Verifies WildcardLevelText names a key wildcard's level as GetLimit does: the pattern less
// the request key's "<key>_", or the whole pattern when it does not start so.
TEST_F(MatchTest, KeyWildcardLevelText) {
  Load(R"(
domain: kwt
descriptors:
  - key: user_*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: t*
    value: v*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /v1/*
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  const DescriptorNode* user = Match("kwt", {{"user", "a"}});
  ASSERT_NE(user, nullptr);
  EXPECT_TRUE(user->key_wildcard);
  EXPECT_EQ(WildcardLevelText(*user, "user"), "*");
  EXPECT_EQ(WildcardLevelText(*user, "user_id"), "user_*");
  const DescriptorNode* t = Match("kwt", {{"tenant", "v1"}});
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->composite_pattern, "t*_v*");
  EXPECT_EQ(WildcardLevelText(*t, "tenant"), "t*_v*");
  const DescriptorNode* path = Match("kwt", {{"path", "/v1/x"}});
  ASSERT_NE(path, nullptr);
  EXPECT_FALSE(path->key_wildcard);
  EXPECT_EQ(WildcardLevelText(*path, "path"), "/v1/*");
}

// Verifies Match does not allocate for a key wildcard either.
TEST_F(MatchTest, KeyWildcardDoesNotAllocate) {
  Load(R"(
domain: hot
descriptors:
  - key: "service_*"
    descriptors:
      - key: client
        rate_limit: {unit: second, requests_per_unit: 1}
)");
  const DescriptorEntryView entries[] = {{"service", "user-accounts-api"}, {"client", "c"}};
  g_allocations = 0;
  g_count_allocations = true;
  const DescriptorNode* node = config_->Match("hot", entries);
  g_count_allocations = false;
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(g_allocations.load(), 0u);
}

// ---- No backtracking.

// Verifies that once an exact child is chosen, a dead end below it is final: the default
// sibling that would have matched deeper is not tried.
TEST_F(MatchTest, NoBacktrackingFromExactToDefault) {
  Load(R"(
domain: nb
descriptors:
  - key: a
    value: x
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: c
        rate_limit: {unit: second, requests_per_unit: 2}
)");
  EXPECT_EQ(Limit("nb", {{"a", "x"}, {"b", "1"}}), 1);
  EXPECT_EQ(Limit("nb", {{"a", "y"}, {"c", "1"}}), 2);
  EXPECT_EQ(Limit("nb", {{"a", "x"}, {"c", "1"}}), -1);
}

// Verifies that once a wildcard child is chosen, neither a later wildcard nor the default is
// tried after a dead end below it.
TEST_F(MatchTest, NoBacktrackingFromWildcard) {
  Load(R"(
domain: nb
descriptors:
  - key: a
    value: x*
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    value: "*"
    descriptors:
      - key: c
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: a
    descriptors:
      - key: d
        rate_limit: {unit: second, requests_per_unit: 3}
)");
  EXPECT_EQ(Limit("nb", {{"a", "xy"}, {"b", "1"}}), 1);
  EXPECT_EQ(Limit("nb", {{"a", "xy"}, {"c", "1"}}), -1);
  EXPECT_EQ(Limit("nb", {{"a", "xy"}, {"d", "1"}}), -1);
  EXPECT_EQ(Limit("nb", {{"a", "yy"}, {"c", "1"}}), 2);
  EXPECT_EQ(Limit("nb", {{"a", "yy"}, {"d", "1"}}), -1);  // "*" wins over the default
}

// Verifies that an exact child without rules still wins over a default with rules: the choice
// is made on names, not on whether a rule lies at the end.
TEST_F(MatchTest, ExactWithoutRuleStillHidesDefault) {
  Load(R"(
domain: hide
descriptors:
  - key: a
    value: x
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  EXPECT_EQ(Limit("hide", {{"a", "x"}}), -1);
  EXPECT_EQ(Limit("hide", {{"a", "y"}}), 1);
}

// ---- Exact lookup details.

// Verifies the exact lookup compares the key, not only the joined "key_value" string.
TEST_F(MatchTest, ExactLookupComparesKey) {
  Load(R"(
domain: join
descriptors:
  - key: a_b
    value: c
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  EXPECT_EQ(Limit("join", {{"a_b", "c"}}), 1);
  EXPECT_EQ(Limit("join", {{"a", "b_c"}}), -1);
}

// Verifies Match reports, level by level, the node reached and whether by the exact value, a
// wildcard or the key's default (what share_threshold and value_to_metric need).
TEST_F(MatchTest, ReportsHowEachLevelMatched) {
  Load(R"(
domain: steps
descriptors:
  - key: service
    value: api
    descriptors:
      - key: path
        value: /v1/*
        descriptors:
          - key: client
            rate_limit: {unit: second, requests_per_unit: 1}
)");
  const DescriptorEntryView entries[] = {{"service", "api"}, {"path", "/v1/x"}, {"client", "c"}};
  MatchSteps steps;
  const DescriptorNode* node = config_->Match("steps", entries, &steps);
  ASSERT_NE(node, nullptr);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].how, MatchStep::How::kExact);
  EXPECT_EQ(steps[0].node->value, "api");
  EXPECT_EQ(steps[1].how, MatchStep::How::kWildcard);
  EXPECT_EQ(steps[1].node->value, "/v1/*");
  EXPECT_EQ(steps[2].how, MatchStep::How::kDefault);
  EXPECT_EQ(steps[2].node, node);
}

// Verifies exact matching of values longer than the on-stack buffer.
TEST_F(MatchTest, MatchesLongValues) {
  const std::string long_value(1000, 'v');
  Load("domain: long\ndescriptors:\n  - key: k\n    value: " + long_value +
       "\n    rate_limit: {unit: second, requests_per_unit: 7}\n");
  EXPECT_EQ(Limit("long", {{"k", long_value}}), 7);
  EXPECT_EQ(Limit("long", {{"k", long_value + "w"}}), -1);
}

// Verifies Match does not allocate for exact, wildcard and default lookups of usual sizes.
TEST_F(MatchTest, DoesNotAllocate) {
  Load(R"(
domain: hot
descriptors:
  - key: service
    value: user-accounts-api
    descriptors:
      - key: path
        value: /v1/*
        descriptors:
          - key: client
            rate_limit: {unit: second, requests_per_unit: 1}
)");
  const DescriptorEntryView entries[] = {
      // "service_user-accounts-api" is too long for std::string's inline buffer.
      {"service", "user-accounts-api"}, {"path", "/v1/items"}, {"client", "10.0.0.1"}};
  MatchSteps steps;
  g_allocations = 0;
  g_count_allocations = true;
  const DescriptorNode* node = config_->Match("hot", entries);
  const DescriptorNode* unknown = config_->Match("cold", entries);
  const DescriptorNode* with_steps = config_->Match("hot", entries, &steps);
  g_count_allocations = false;
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(with_steps, node);
  EXPECT_EQ(node->full_key, "hot.service_user-accounts-api.path_/v1/*.client");
  EXPECT_EQ(unknown, nullptr);
  EXPECT_EQ(g_allocations.load(), 0u);

  // The counter itself works: a real allocation is seen.
  g_count_allocations = true;
  auto probe = std::make_unique<std::string>(100, 'x');
  g_count_allocations = false;
  EXPECT_GT(g_allocations.load(), 0u);
}

}  // namespace
}  // namespace sluice
