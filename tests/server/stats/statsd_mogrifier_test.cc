#include "server/stats/statsd_mogrifier.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr char kThreeParts[] = R"(^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$)";

StatsdMogrifierRule Rule(std::string id, std::string pattern, std::string name,
                         std::vector<std::pair<std::string, std::string>> tags) {
  return StatsdMogrifierRule{std::move(id), std::move(pattern), std::move(name), std::move(tags)};
}

// One case of envoyproxy/ratelimit's src/godogstats/mogrifier_map_test.go
// (TestLoadMogrifiersFromEnv, TestMogrify), with the README's example added.
struct MogrifyCase {
  const char* what;
  std::vector<StatsdMogrifierRule> rules;
  std::string input;
  std::string name;
  std::vector<std::string> tags;  // any order: upstream's come from a Go map
};

std::vector<MogrifyCase> UpstreamCases() {
  return {
      {"Simple replacement",
       {Rule("TAG", kThreeParts, "ratelimit.service.rate_limit.$3",
             {{"domain", "$1"}, {"descriptor", "$2"}})},
       "ratelimit.service.rate_limit.mongo_cps.database_users.within_limit",
       "ratelimit.service.rate_limit.within_limit",
       {"domain:mongo_cps", "descriptor:database_users"}},
      {"Out of bounds index",
       {Rule("TAG", kThreeParts, "ratelimit.service.rate_limit.$3",
             {{"domain", "$1"}, {"descriptor", "$5"}})},
       "ratelimit.service.rate_limit.mongo_cps.database_users.within_limit",
       "ratelimit.service.rate_limit.within_limit",
       {"domain:mongo_cps", "descriptor:$5"}},
      {"No placeholders in tags",
       {Rule("TAG", kThreeParts, "ratelimit.service.rate_limit.$3",
             {{"domain", "mongo_cps"}, {"descriptor", "database_users"}})},
       "ratelimit.service.rate_limit.mongo_cps.database_users.within_limit",
       "ratelimit.service.rate_limit.within_limit",
       {"domain:mongo_cps", "descriptor:database_users"}},
      {"No matches",
       {Rule("TAG", kThreeParts, "ratelimit.service.rate_limit.$3",
             {{"domain", "$1"}, {"descriptor", "$4"}})},
       "some.unmatched.metric",
       "some.unmatched.metric",
       {}},
      {"Two mogrifiers: First match",
       {Rule("SPECIFIC", R"(^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.foo$)", "custom.foo",
             {{"domain", "$1"}, {"descriptor", "$2"}}),
        Rule("WILDCARD", kThreeParts, "ratelimit.service.rate_limit.$3",
             {{"domain", "$1"}, {"descriptor", "$2"}})},
       "ratelimit.service.rate_limit.mongo_cps.database_users.foo",
       "custom.foo",
       {"domain:mongo_cps", "descriptor:database_users"}},
      {"Two mogrifiers: second match",
       {Rule("SPECIFIC", R"(^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.foo$)", "custom.foo",
             {{"domain", "$1"}, {"descriptor", "$2"}}),
        Rule("WILDCARD", kThreeParts, "ratelimit.service.rate_limit.$3",
             {{"domain", "$1"}, {"descriptor", "$2"}})},
       "ratelimit.service.rate_limit.mongo_cps.database_users.within_limit",
       "ratelimit.service.rate_limit.within_limit",
       {"domain:mongo_cps", "descriptor:database_users"}},
      // README, "DogStatsD": DOMAIN, then HITS (with a nested descriptor: (.*) takes both).
      {"README DOMAIN",
       {Rule("DOMAIN", R"(^some\.original\.metric\.(.*)$)", "some.original.metric",
             {{"domain", "$1"}})},
       "some.original.metric.TAG",
       "some.original.metric",
       {"domain:TAG"}},
      {"README HITS, nested descriptor",
       {Rule("DOMAIN", R"(^some\.original\.metric\.(.*)$)", "some.original.metric",
             {{"domain", "$1"}}),
        Rule("HITS", R"(^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$)",
             "ratelimit.service.rate_limit.$3", {{"domain", "$1"}, {"descriptor", "$2"}})},
       "ratelimit.service.rate_limit.messaging.message_type_marketing.to_number.over_limit",
       "ratelimit.service.rate_limit.over_limit",
       {"domain:messaging", "descriptor:message_type_marketing.to_number"}},
      // Unanchored, as Go's FindStringSubmatch: a match anywhere counts, $0 is what matched.
      {"Unanchored, $0",
       {Rule("MID", R"(rate_limit\.(\w+))", "x.$0.$1", {})},
       "ratelimit.service.rate_limit.gw.user.total_hits",
       "x.rate_limit.gw.gw",
       {}},
      // A group that took no part is "", and $12 is group 12, not $1 and "2".
      {"Unset group and two digits",
       {Rule("OPT", R"(^a\.(b)?(c)$)", "n.$1.$2.$12", {{"t", "[$1]"}})},
       "a.c",
       "n..c.$12",
       {"t:[]"}},
  };
}

// Verifies upstream's table of cases: the first matching rule names the metric and its tags,
// $N placeholders out of range stay as written, and a name no rule matches passes unchanged.
TEST(StatsdMogrifierTest, UpstreamCases) {
  for (const MogrifyCase& c : UpstreamCases()) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<StatsdMogrifiers> mogrifiers = StatsdMogrifiers::Create(c.rules);
    ASSERT_TRUE(mogrifiers.ok()) << mogrifiers.status();
    StatsdMogrifiers::Result result = mogrifiers->Mogrify(c.input);
    EXPECT_EQ(result.name, c.name);
    EXPECT_THAT(result.tags, UnorderedElementsAreArray(c.tags));
  }
}

// Verifies the tags keep the order they were configured in (upstream's Go map has none).
TEST(StatsdMogrifierTest, TagsKeepTheirOrder) {
  auto mogrifiers = StatsdMogrifiers::Create({Rule(
      "T", kThreeParts, "n", {{"z", "$1"}, {"a", "$2"}, {"m", "$3"}})});
  ASSERT_TRUE(mogrifiers.ok());
  EXPECT_THAT(mogrifiers->Mogrify("ratelimit.service.rate_limit.d.k.total_hits").tags,
              ElementsAre("z:d", "a:k", "m:total_hits"));
}

// Verifies no rule (upstream's TestEmpty and TestNil) leaves every name alone, without tags.
TEST(StatsdMogrifierTest, NoRulesNoChange) {
  StatsdMogrifiers none;
  StatsdMogrifiers::Result result =
      none.Mogrify("ratelimit.service.rate_limit.mongo_cps.database_users.within_limit");
  EXPECT_EQ(result.name, "ratelimit.service.rate_limit.mongo_cps.database_users.within_limit");
  EXPECT_THAT(result.tags, IsEmpty());
  auto empty = StatsdMogrifiers::Create({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// Verifies the rules upstream refuses at start (its TestValidation) are refused, naming the
// rule, and so is a pattern that does not compile.
TEST(StatsdMogrifierTest, RefusesWhatUpstreamRefuses) {
  const std::vector<std::pair<StatsdMogrifierRule, std::string>> bad = {
      {Rule("TAG", "", "n", {{"domain", "$1"}}), "mogrifier TAG has no pattern"},
      {Rule("TAG", kThreeParts, "", {{"domain", "$1"}}), "mogrifier TAG has no name"},
      {Rule("TAG", kThreeParts, "n", {{"", "5"}}), "mogrifier TAG has a tag with no key"},
      {Rule("TAG", kThreeParts, "n", {{"domain", "$1"}, {"descriptor", ""}}),
       "mogrifier TAG has no value for tag descriptor"},
      {Rule("TAG", "(", "n", {}), "mogrifier TAG pattern '(' does not compile"},
  };
  for (const auto& [rule, message] : bad) {
    absl::StatusOr<StatsdMogrifiers> mogrifiers = StatsdMogrifiers::Create({rule});
    ASSERT_FALSE(mogrifiers.ok()) << message;
    EXPECT_EQ(mogrifiers.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(mogrifiers.status().message()), HasSubstr(message));
  }
}

// Verifies the placeholder rules of makePatternHandler: `$` and digits, all of them; a group
// that does not exist, or a number past int64, stays as written; a `$` without digits is text.
TEST(StatsdMogrifierTest, ExpandsPlaceholdersAsUpstream) {
  const std::vector<absl::string_view> groups = {"all", "one", "two"};
  EXPECT_EQ(ExpandMogrifierTemplate("$0-$1-$2", groups), "all-one-two");
  EXPECT_EQ(ExpandMogrifierTemplate("$3 $10 $01", groups), "$3 $10 one");
  EXPECT_EQ(ExpandMogrifierTemplate("$$1 $ $a a$", groups), "$one $ $a a$");
  EXPECT_EQ(ExpandMogrifierTemplate("$99999999999999999999", groups), "$99999999999999999999");
  EXPECT_EQ(ExpandMogrifierTemplate("", groups), "");
}

}  // namespace
}  // namespace sluice
